#!/usr/bin/perl
# ticker.pl DIR COUNT [INTERVAL]: a command for amqplock hold made of three
# processes that each append "ROLE N" to DIR/ticks every INTERVAL seconds
# (default 0.1), COUNT times (0: until killed): itself ("main"), a child in
# its process group ("child"), and a child in a session of its own
# ("daemon", setsid), which only a walk of the process tree finds. Each
# writes its pid to DIR/pid.ROLE first; once all three have, main prints
# "ticker: ticking" (for a terminal) and creates DIR/ready. TERM makes
# each append "ROLE TERM" to DIR/signals and exit 0: a process that writes
# that ran again after the signal. Main exits 0 once its children have
# done their ticks.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Files qw(spew append);
use POSIX ();
use Time::HiRes qw(sleep);

my ($d, $count, $interval) = @ARGV;
defined $count or die "usage: ticker.pl DIR COUNT [INTERVAL]\n";
$interval //= 0.1;
$| = 1;

sub ticks {
    my ($role) = @_;
    $SIG{TERM} = sub { append("$d/signals", "$role TERM\n"); POSIX::_exit(0) };
    spew("$d/pid.$role", "$$\n");
    for (my $i = 1; !$count || $i <= $count; $i++) {
        append("$d/ticks", "$role $i\n");
        sleep $interval;
    }
}

my @kids;
for my $role (qw(child daemon)) {
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        POSIX::setsid() or die "setsid: $!\n" if $role eq 'daemon';
        ticks($role);
        POSIX::_exit(0);
    }
    push @kids, $pid;
}
$SIG{TERM} = sub { append("$d/signals", "main TERM\n"); POSIX::_exit(0) };
sleep 0.01 until -e "$d/pid.child" && -e "$d/pid.daemon";
spew("$d/pid.main", "$$\n");
print "ticker: ticking\n";
spew("$d/ready", "");
ticks('main');
waitpid($_, 0) for @kids;
exit 0;
