#!/usr/bin/perl
# killer.pl DIR: until DIR/stop exists, SIGKILLs the amqplock hold of a
# random command inside crit.pl's critical section (DIR/inside, read under
# DIR/lock), then rests 50-250 ms; appends each victim's pid to
# DIR/killed. One process, so that it is quick enough to find a command
# still inside.
use strict;
use warnings;
use Fcntl qw(:flock);
use Time::HiRes qw(sleep);

my $d = shift or die "usage: killer.pl DIR\n";
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
        my (undef, undef, $hold) = split ' ', $inside[rand @inside];
        my $comm = '';
        if (open(my $c, '<', "/proc/$hold/comm")) {
            $comm = <$c> // '';
        }
        # only an amqplock, not a reused pid
        $victim = $hold if $comm eq "amqplock\n" && kill('KILL', $hold);
    }
    flock($lock, LOCK_UN);
    if ($victim) {
        print $killed "$victim\n";
        sleep(0.05 + rand(0.2));
    } else {
        sleep(0.005);
    }
}
