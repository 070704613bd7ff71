#!/usr/bin/perl
# killer.pl DIR: until DIR/stop exists, SIGKILLs the amqplock hold of a
# random command inside crit.pl's critical section (DIR/inside, read under
# DIR/lock), then rests 50-250 ms; appends each victim's pid to
# DIR/killed. One process, so that it is quick enough to find a command
# still inside. At most one kill for every two turns (lines of DIR/log),
# whatever the machine's speed: on a busy machine commands stay inside
# longer, and a rest of 50-250 ms alone let it kill three holds in four,
# leaving few clean releases (and hand-overs) to test. The hold is found from the command: the amqplock whose
# keeper (amqp-keeper) is the command's parent, or an ancestor of it
# (Holds.pm), and must be the one crit.pl recorded.
use strict;
use warnings;
use Fcntl qw(:flock);
use FindBin;
use lib $FindBin::Bin;
use Holds qw(hold_of);
use Time::HiRes qw(sleep);

my $d = shift or die "usage: killer.pl DIR\n";

# The turns so far: lines of DIR/log.
sub turns {
    open(my $f, '<', "$d/log") or return 0;
    my $n = 0;
    $n++ while <$f>;
    return $n;
}
open(my $lock, '>>', "$d/lock") or die "$d/lock: $!\n";
open(my $killed, '>>', "$d/killed") or die "$d/killed: $!\n";
$killed->autoflush(1);
until (-e "$d/stop") {
    flock($lock, LOCK_EX) or die "flock: $!\n";
    my @inside;
    if (open(my $f, '<', "$d/inside")) {
        @inside = <$f>;
    }
    my $victim;
    if (@inside) {
        my ($pid, undef, $recorded) = split ' ', $inside[rand @inside];
        my $hold = hold_of($pid);
        # only that amqplock, not a reused pid
        $victim = $hold if $hold && $hold == $recorded && kill('KILL', $hold);
    }
    flock($lock, LOCK_UN);
    if ($victim) {
        print $killed "$victim\n";
        my $turns = turns() + 2;
        sleep(0.05 + rand(0.2));
        sleep(0.005) until -e "$d/stop" || turns() >= $turns;
    } else {
        sleep(0.005);
    }
}
