#!/usr/bin/perl
# crit.pl DIR: one turn in the critical section of the fault suite's
# at-most-N runs, as the CMD of amqplock hold (AMQPLOCK_SLOT says its slot).
#
# Under flock DIR/lock it reads DIR/inside ("pid slot" of the commands that
# entered and did not leave), drops those no longer running (a command
# killed with its hold never leaves), and records in DIR/bad any breach:
# more live commands than DIR/bound allows, or its slot already taken by a
# live command. Each entry appends "monotonic-time count slot pid" to
# DIR/log. It stays 20-80 ms, then leaves. Its parent is the hold, so
# DIR/inside also tells a killer which amqplock process holds a slot.
use strict;
use warnings;
use Fcntl qw(:flock);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my $d = shift or die "usage: crit.pl DIR\n";
my $slot = $ENV{AMQPLOCK_SLOT} // 'unset';

# A command counts as running until it is a zombie or has SIGKILL pending:
# from then on it runs no more code of its own, even if a loaded machine
# takes a while to tear it down. (When a hold is killed, the kernel closes
# its socket and then sends the command its death signal; the broker
# cannot hand the slot on faster than that.)
sub running {
    my ($pid) = @_;
    open(my $f, '<', "/proc/$pid/status") or return 0;
    my %st = map { /^(\w+):\s*(.*)/ ? ($1, $2) : () } <$f>;
    return 0 if ($st{State} // 'Z') =~ /^[ZX]/;
    for my $pending (@st{qw(SigPnd ShdPnd)}) {
        return 0 if defined $pending && hex($pending) & (1 << 8);    # SIGKILL
    }
    return 1;
}

sub slurp {
    my ($path, $default) = @_;
    open(my $f, '<', $path) or return $default;
    local $/;
    my $s = <$f>;
    return $s;
}

sub spew {
    my ($path, $text, $append) = @_;
    open(my $f, $append ? '>>' : '>', $path) or die "$path: $!\n";
    print $f $text;
    close $f or die "$path: $!\n";
}

open(my $lock, '>>', "$d/lock") or die "$d/lock: $!\n";

flock($lock, LOCK_EX) or die "flock: $!\n";
my @inside = grep { running((split ' ')[0]) } split /\n/, slurp("$d/inside", '');
my ($bound) = slurp("$d/bound", '0') =~ /(\d+)/;
my $count = @inside + 1;
spew("$d/bad", "$count inside, bound $bound\n", 1) if $count > $bound;
for (@inside) {
    my ($pid, $s) = split ' ';
    spew("$d/bad", "slot $slot taken by $pid and $$ at once\n", 1) if $s eq $slot;
}
push @inside, "$$ $slot ${\getppid()}";
spew("$d/inside", join('', map {"$_\n"} @inside));
spew("$d/log", sprintf("%.6f %d %s %d\n", clock_gettime(CLOCK_MONOTONIC), $count, $slot, $$), 1);
flock($lock, LOCK_UN);

sleep(0.02 + rand(0.06));

flock($lock, LOCK_EX) or die "flock: $!\n";
@inside = grep { (split ' ')[0] != $$ } split /\n/, slurp("$d/inside", '');
spew("$d/inside", join('', map {"$_\n"} @inside));
flock($lock, LOCK_UN);
