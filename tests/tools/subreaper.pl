#!/usr/bin/perl
# subreaper.pl PIDFILE CMD [ARGS...]: makes itself a child subreaper (Linux
# prctl PR_SET_CHILD_SUBREAPER), so that the orphans of CMD's process tree
# become its children, runs CMD (its pid written to PIDFILE) and waits for
# CMD alone: the orphans are never reaped and stay zombies, as under a
# container's pid 1 that does not reap. Passes TERM, INT and HUP on to CMD
# and exits with CMD's status (128+N for a signal).
use strict;
use warnings;
require 'syscall.ph';

my $pidfile = shift;
syscall(&SYS_prctl, 36, 1, 0, 0, 0) == 0 or die "prctl(PR_SET_CHILD_SUBREAPER): $!\n";
my $pid = fork // die "fork: $!\n";
if (!$pid) { exec @ARGV or die "exec $ARGV[0]: $!\n" }
open(my $f, ">", "$pidfile.tmp") or die "$pidfile.tmp: $!\n";
print $f "$pid\n";
close $f;
rename "$pidfile.tmp", $pidfile or die "rename: $!\n";
$SIG{$_} = sub { kill $_[0], $pid } for qw(TERM INT HUP);
1 while waitpid($pid, 0) == -1 && $!{EINTR};
exit($? & 127 ? 128 + ($? & 127) : $? >> 8);
