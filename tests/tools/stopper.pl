#!/usr/bin/perl
# stopper.pl DIR: job control against the holds of crit.pl's critical
# section, until DIR/stop exists. Every 0.2-0.8 s it picks at random a hold
# with a command inside (DIR/inside, under DIR/lock) that it has not
# stopped already, and sends it TSTP, then CONT 0.05-3 s later; every
# eighth pick is a kill -9 instead. Holds are found as killer.pl finds them
# (Holds.pm). It never waits for DIR/lock: a process that holds it may be
# one it stopped, and must be continued on time. Appends "pid seconds" for
# each stop to DIR/stops and each killed pid to DIR/killed; when it ends,
# whatever it stopped is continued.
use strict;
use warnings;
use Fcntl qw(:flock);
use FindBin;
use lib $FindBin::Bin;
use Holds qw(comm hold_of);
use List::Util qw(min max);
use Time::HiRes qw(time sleep);

my $d = shift or die "usage: stopper.pl DIR\n";
open(my $lock, '>>', "$d/lock") or die "$d/lock: $!\n";
open(my $stops, '>>', "$d/stops") or die "$d/stops: $!\n";
open(my $killed, '>>', "$d/killed") or die "$d/killed: $!\n";
$stops->autoflush(1);
$killed->autoflush(1);

my (%due, %since);    # hold -> when to continue it, when it was stopped
my $next = time + 0.2 + rand(0.6);
my $picks = 0;

sub resume {
    my ($h) = @_;
    kill('CONT', $h) if comm($h) eq 'amqplock';
    printf $stops "%d %.3f\n", $h, time - $since{$h};
    delete $due{$h};
    delete $since{$h};
}

until (-e "$d/stop") {
    my $now = time;
    resume($_) for grep { $due{$_} <= $now } keys %due;
    if ($now >= $next && flock($lock, LOCK_EX | LOCK_NB)) {
        my @holds;
        if (open(my $f, '<', "$d/inside")) {
            for (<$f>) {
                my ($pid, undef, $recorded) = split ' ';
                my $h = hold_of($pid);
                push @holds, $h if $h && $h == $recorded && !$due{$h};
            }
        }
        if (@holds) {
            my $h = $holds[rand @holds];
            if (++$picks % 8 == 0) {
                print $killed "$h\n" if kill('KILL', $h);
            } elsif (kill('TSTP', $h)) {
                $since{$h} = $now;
                $due{$h} = $now + 0.05 + rand(2.95);
            }
        }
        flock($lock, LOCK_UN);
        $next = $now + 0.2 + rand(0.6);
    }
    sleep(max(0.005, min(0.05, min($next, values %due) - time)));
}
resume($_) for keys %due;
