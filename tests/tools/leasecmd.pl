#!/usr/bin/perl
# leasecmd.pl FILE SECS [STOP_SECS [UNTIL]]: a command for amqplock hold in
# the lease suite that leaves a record of when it ran. It appends to FILE
# "start SEMAPHORE SLOT TIME" (from AMQPLOCK_SEMAPHORE and AMQPLOCK_SLOT),
# then "tick TIME" every 0.1 s for SECS seconds (or until the file UNTIL
# exists, if given and sooner), then "end TIME", and exits 0; TIME is
# CLOCK_MONOTONIC. It writes FILE.ready once the start line is
# written. SIGTERM is recorded ("TERM TIME") and does not end it at once:
# it keeps ticking for STOP_SECS more (default 0), as a command that takes
# a while to stop, then writes "end TIME" and exits 0. Any other catchable
# signal that would end or stop it (HUP, INT, QUIT, USR1, USR2, TSTP,
# CONT) is recorded too. Each line is appended with its own open and
# close: the time of the last line is the last moment it wrote anything.
# tests/tools/overlaps.pl reads these files.
use strict;
use warnings;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my ($file, $secs, $stop, $until) = @ARGV;
defined $secs or die "usage: leasecmd.pl FILE SECS [STOP_SECS [UNTIL]]\n";
$stop //= 0;

sub now { sprintf "%.6f", clock_gettime(CLOCK_MONOTONIC) }
sub out {
    open(my $f, '>>', $file) or die "$file: $!\n";
    print $f "$_[0]\n";
    close $f or die "$file: $!\n";
}

my $end = clock_gettime(CLOCK_MONOTONIC) + $secs;
my $termed = 0;
$SIG{TERM} = sub {
    out("TERM " . now());
    if (!$termed) {
        $termed = 1;
        my $by = clock_gettime(CLOCK_MONOTONIC) + $stop;
        $end = $by if $by < $end;
    }
};
for my $sig (qw(HUP INT QUIT USR1 USR2 TSTP CONT)) {
    $SIG{$sig} = sub { out("$sig " . now()) };
}
out(join ' ', 'start', $ENV{AMQPLOCK_SEMAPHORE} // 'unset', $ENV{AMQPLOCK_SLOT} // 'unset', now());
open(my $r, '>', "$file.ready") or die "$file.ready: $!\n";
close $r;
while (clock_gettime(CLOCK_MONOTONIC) < $end) {
    out("tick " . now());
    last if defined $until && -e $until;
    my $left = $end - clock_gettime(CLOCK_MONOTONIC);
    sleep($left < 0.1 ? ($left > 0 ? $left : 0) : 0.1);
}
out("end " . now());
exit 0;
