#!/usr/bin/perl
# overlaps.pl FILE...: reads the records of tests/tools/leasecmd.pl and
# prints, for each FILE:
#
#   interval FILE SEMAPHORE/SLOT START END MAXGAP SIGNALS ENDED STARTS
#
# (START: its start line's time; END: the time of its last line, whatever
# it is, so also of a command killed with SIGKILL; MAXGAP: the longest
# time between two of its lines, a stop or a freeze shows there; SIGNALS:
# the signals it recorded, comma-separated, or "-"; ENDED: 1 if it wrote
# its end line; STARTS: how many start lines, more than one is a command
# run twice into one file), and for each two commands that ran one after
# the other on one slot of one semaphore, in order of their start:
#
#   handover SEMAPHORE/SLOT FROM_FILE TO_FILE MARGIN
#
# with MARGIN = the start of the second - the end of the first, in
# seconds: negative is an overlap. Files without a start line are left
# out (their commands never ran).
use strict;
use warnings;

my %by_key;
for my $file (@ARGV) {
    open(my $f, '<', $file) or next;
    my ($key, $start, $last, $gap, $ended, $starts, @sigs) = (undef, undef, undef, 0, 0, 0);
    while (<$f>) {
        my @w = split ' ';
        next unless @w;
        my $t = $w[-1];
        next unless $t =~ /^[0-9.]+$/;
        if ($w[0] eq 'start') {
            $starts++;
            ($key, $start) = ("$w[1]/$w[2]", $t) if $starts == 1;
        } elsif ($w[0] eq 'end') {
            $ended = 1;
        } elsif ($w[0] ne 'tick') {
            push @sigs, $w[0];
        }
        $gap = $t - $last if defined $last && $t - $last > $gap;
        $last = $t;
    }
    next unless defined $key;
    printf "interval %s %s %.6f %.6f %.3f %s %d %d\n", $file, $key, $start, $last, $gap,
        (@sigs ? join(',', @sigs) : '-'), $ended, $starts;
    push @{ $by_key{$key} }, [$file, $start, $last];
}
for my $key (sort keys %by_key) {
    my @runs = sort { $a->[1] <=> $b->[1] } @{ $by_key{$key} };
    for my $i (1 .. $#runs) {
        # against the latest end so far: a long run may cover several
        my ($prev) = sort { $b->[2] <=> $a->[2] } @runs[0 .. $i - 1];
        printf "handover %s %s %s %.3f\n", $key, $prev->[0], $runs[$i][0], $runs[$i][1] - $prev->[2];
    }
}
