#!/usr/bin/perl
# bench/phases.pl AMQPLOCK NAME [ROUNDS]: where the time of one clean
# hand-off goes, step by step (make bench-phases; docs/internals.md,
# section 11). NAME must be a 1-slot semaphore on the broker of
# $AMQPLOCK_URL, free.
#
# Each round: a holder R runs bench/stamp for 0.4 s under `amqplock -v
# hold`; 0.15 s in, a waiter W starts `amqplock -v hold -w 10` with its own
# stamp; then 1.1 s pass, for what W's own release left in the line to
# expire. A reader here stamps every -v line of both as it arrives
# (CLOCK_MONOTONIC, the clock bench/stamp writes), so each step is timed
# from the end of R's command: R's release traced, W woken, W claiming,
# W's claim answered, W's command started. A -v line is stamped when read,
# a little after it was written; the steps are comparable, not exact.
# Prints every round (PHASES_SHOW=1: with every -v line, its time), then
# the medians. Nothing here fails on a figure.
use strict;
use warnings;
use File::Temp qw(tempdir);
use IO::Select;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my ($amqplock, $name, $rounds) = @ARGV;
die "usage: bench/phases.pl AMQPLOCK NAME [ROUNDS]\n" unless $amqplock && $name;
$rounds ||= 15;
my $stamp = ($0 =~ s{[^/]*$}{}r) . 'stamp';
die "bench/phases.pl: $stamp is missing (make bench-tools)\n" unless -x $stamp;
my $log = tempdir(CLEANUP => 1) . '/stamps';

sub now { clock_gettime(CLOCK_MONOTONIC) }

# The steps, each by the -v line (of R or W) that marks it.
my @steps = (
    ['R released',  'R', qr/released slot/],
    ['W woken',     'W', qr/woken: first in line/],
    ['W claiming',  'W', qr/claiming slot|offered: adopting|offered: asking/],
    ['W answered',  'W', qr/leased for|slot \d+ is ours/],
);
my @columns = ((map { $_->[0] } @steps), 'W command');

sub start {
    my ($tag, $secs, @opts) = @_;
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $r;
        open STDERR, '>&', $w or die;
        exec $amqplock, '-v', 'hold', @opts, $name, '--', $stamp, $log, $secs, $tag;
        die "exec $amqplock: $!";
    }
    close $w;
    return ($pid, $r);
}

my %all;
for my $round (1 .. $rounds) {
    unlink $log;
    my ($rpid, $rfh) = start('R', '0.4');
    sleep 0.15;
    my ($wpid, $wfh) = start('W', '0.01', '-w', '10');
    my $sel = IO::Select->new($rfh, $wfh);
    my (%at, %buf);
    my $give_up = now() + 8;
    while ($sel->count && now() < $give_up) {
        for my $fh ($sel->can_read(0.5)) {
            my $n = sysread($fh, my $bytes, 65536);
            my $t = now();
            if (!$n) { $sel->remove($fh); next }
            my $who = $fh == $rfh ? 'R' : 'W';
            $buf{$who} .= $bytes;
            while ($buf{$who} =~ s/^(.*)\n//) {
                my $line = $1;
                push @{$at{lines}}, [$t, "$who $line"] if $ENV{PHASES_SHOW};
                for my $s (@steps) {
                    my ($step, $by, $re) = @$s;
                    # W's steps count only after R's release.
                    next if $by ne $who || defined $at{$step} || $line !~ $re;
                    next if $by eq 'W' && !defined $at{'R released'};
                    $at{$step} = $t;
                }
            }
        }
    }
    kill 'KILL', $rpid, $wpid if now() >= $give_up;
    waitpid($rpid, 0);
    waitpid($wpid, 0);
    open my $lf, '<', $log or die "bench/phases.pl: no stamps in round $round\n";
    while (<$lf>) {
        my ($what, $t, undef, undef, $tag) = split;
        $at{'R end'} = $t if $tag eq 'R' && $what eq 'end';
        $at{'W command'} = $t if $tag eq 'W' && $what eq 'start';
    }
    close $lf;
    my $t0 = $at{'R end'};
    next unless defined $t0;
    printf "  %8.2f %s\n", ($_->[0] - $t0) * 1000, $_->[1] for @{$at{lines} // []};
    printf 'round %2d:', $round;
    for my $c (@columns) {
        my $ms = defined $at{$c} ? ($at{$c} - $t0) * 1000 : undef;
        push @{$all{$c}}, $ms if defined $ms;
        printf ' %s %s;', $c, defined $ms ? sprintf('%.2f', $ms) : '-';
    }
    print "\n";
    # W's release left an offer (0.5 s) and a wake-up (1 s) in the line
    # for nobody: the next round's W would take them for its own
    sleep 1.1;
}
print "medians, ms after R's command ended:";
for my $c (@columns) {
    my @v = sort { $a <=> $b } @{$all{$c} // []};
    printf ' %s %s;', $c, @v ? sprintf('%.2f', $v[@v / 2]) : '-';
}
print "\n";
