#!/usr/bin/perl
# daemon.pl DIR: a command for amqplock hold that leaves a daemon behind,
# as `sh -c 'setsid job & exit 0'` does. It starts a child that moves to a
# session of its own (setsid), writes its pid to DIR/daemon.pid and runs
# until DIR/end exists (then exits 0); the daemon appends the name of each
# TERM, INT or HUP it gets to DIR/signals, and TERM ends it (status 0).
# The command itself writes its pid to DIR/cmd.pid and exits 0 as soon as
# the daemon's pid is written.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Files qw(spew append);
use POSIX ();
use Time::HiRes qw(sleep);

my $d = shift or die "usage: daemon.pl DIR\n";

sub note { append("$d/signals", "$_[0]\n") }

my $pid = fork // die "fork: $!\n";
if (!$pid) {
    POSIX::setsid() or die "setsid: $!\n";
    $SIG{INT} = sub { note('INT') };
    $SIG{HUP} = sub { note('HUP') };
    $SIG{TERM} = sub { note('TERM'); POSIX::_exit(0) };
    spew("$d/daemon.pid", "$$\n");
    sleep 0.05 until -e "$d/end";
    POSIX::_exit(0);
}
spew("$d/cmd.pid", "$$\n");
sleep 0.01 until -e "$d/daemon.pid";
exit 0;
