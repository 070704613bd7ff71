#!/usr/bin/perl
# stopper.pl DIR: job control against the holds of crit.pl's critical
# section, until DIR/stop exists. Every 0.2-0.8 s it picks at random a hold
# with a command inside (DIR/inside, under DIR/lock) that it has not
# stopped already, and sends it TSTP, then CONT 0.05-3 s later; every
# eighth pick is a kill -9 instead, and every fifth a stop by name: SIGSTOP
# to every process of the hold's tree whose name holds "amqplock", as
# `pkill -STOP amqplock` would send it (amqplock, but not its keeper),
# continued the same way. Holds are found as killer.pl finds them
# (Holds.pm). It never waits for DIR/lock: a process that holds it may be
# one it stopped, and must be continued on time. Appends "pid seconds" for
# each stop to DIR/stops (and the pid of each stop by name to DIR/named)
# and each killed pid to DIR/killed; when it ends, whatever it stopped is
# continued.
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
open(my $named_log, '>>', "$d/named") or die "$d/named: $!\n";
$_->autoflush(1) for $stops, $killed, $named_log;

my (%due, %since);    # hold -> when to continue it, when it was stopped
my %named;            # hold -> the processes a stop by name stopped

# What `pkill -STOP amqplock` stops of hold $h's tree: each process whose
# name holds "amqplock", $h first.
sub by_name {
    my @todo = @_;
    my @found;
    while (defined(my $p = shift @todo)) {
        push @found, $p if comm($p) =~ /amqplock/;
        open(my $f, '<', "/proc/$p/task/$p/children") or next;
        push @todo, split ' ', (<$f> // '');
    }
    return @found;
}
my $next = time + 0.2 + rand(0.6);
my $picks = 0;

sub resume {
    my ($h) = @_;
    kill('CONT', $h) if comm($h) eq 'amqplock';
    kill('CONT', $_) for grep { comm($_) =~ /amqplock/ } @{ delete $named{$h} // [] };
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
            } elsif ($picks % 5 == 0) {
                my @p = by_name($h);
                if (@p && kill('STOP', @p)) {
                    $named{$h} = \@p;
                    print $named_log "$h\n";
                    $since{$h} = $now;
                    $due{$h} = $now + 0.05 + rand(2.95);
                }
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
