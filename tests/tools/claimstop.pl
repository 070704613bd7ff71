#!/usr/bin/perl
# claimstop.pl PID FILE: stops amqplock PID (SIGSTOP) the moment it forks a
# child, which a waiting hold does while the broker answers its claim (the
# command's keeper is readied then), so that it reads the answers only once
# continued, as a hold on a paused VM or a swapping host would. Watches
# /proc/PID/task/PID/children in a tight loop; writes "stopped TIME" to FILE
# (CLOCK_MONOTONIC) and exits 0 once it has stopped PID, or exits 1 if PID
# is gone first.
use strict;
use warnings;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

my ($pid, $file) = @ARGV;
defined $file or die "usage: claimstop.pl PID FILE\n";
my $children = "/proc/$pid/task/$pid/children";
while (1) {
    open(my $f, '<', $children) or exit 1;
    my $list = <$f> // '';
    close $f;
    if ($list =~ /\d/) {
        kill('STOP', $pid) or exit 1;
        open(my $o, '>', $file) or die "$file: $!\n";
        printf $o "stopped %.6f\n", clock_gettime(CLOCK_MONOTONIC);
        close $o;
        exit 0;
    }
}
