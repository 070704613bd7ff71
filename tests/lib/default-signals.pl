#!/usr/bin/perl
# default-signals.pl CMD [ARG...]: runs CMD with every signal at its default
# disposition and none blocked, whatever this process inherited. The
# suites send and expect signals; started under `nohup` (SIGHUP ignored)
# or from a shell that ignores SIGINT for background jobs, a test would
# inherit the ignored signal, and a shell cannot undo that itself (POSIX:
# a signal ignored on entry to a non-interactive shell stays ignored).
# tests/run.sh and tests/cluster/run.sh re-run themselves through it.
use strict;
use warnings;
use Config;
use POSIX ();

@ARGV or die "usage: default-signals.pl CMD [ARG...]\n";
for my $sig (split ' ', $Config{sig_name}) {
    next if $sig =~ /^(ZERO|KILL|STOP|NUM\d+|RTMIN|RTMAX)$/;
    local $@;
    eval { $SIG{$sig} = 'DEFAULT' };
}
POSIX::sigprocmask(POSIX::SIG_SETMASK(), POSIX::SigSet->new()) or die "sigprocmask: $!\n";
exec { $ARGV[0] } @ARGV or die "default-signals.pl: cannot run $ARGV[0]: $!\n";
