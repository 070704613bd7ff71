#!/usr/bin/perl
# crit.pl DIR [linger]: one turn in the critical section of the fault
# suite's at-most-N runs, as the CMD of amqplock hold (AMQPLOCK_SLOT says
# its slot). A turn is a job: this process and, with "linger", a child it
# leaves behind in a session of its own (setsid) that stays inside 50-400
# ms longer, as `setsid job &` would; amqplock must keep the slot until it
# has gone too. With CRIT_ODDJOB set to tests/tools/oddjob.c's binary, one
# lingering child in three is that program instead, whose main thread
# exits at once: /proc shows it as a zombie while its other thread runs
# on, and it counts as inside all the while.
#
# DIR/inside lists "pid slot hold job" for each process of a job inside
# (hold: the amqplock whose keeper is CMD's parent). Under flock DIR/lock
# a job entering records in DIR/bad any breach: more jobs inside than
# DIR/bound allows, or its slot used by another job. A process counts as
# inside until it is a zombie or has SIGKILL pending: from then on it runs
# no more code of its own. (When a hold is killed, the keeper kills every
# process of the command before the broker connection closes.) A stopped
# process does not count either: it runs nothing. But if it ever runs
# again (it catches SIGCONT), it checks at once, under the lock, that no
# other job has entered its slot meanwhile (DIR/owner.SLOT names the last
# job that did) and that the bound still holds; amqplock must never let a
# command go on after its slot was given away. Each entry appends
# "monotonic-time count slot pid" to DIR/log, and keeps in DIR/most the
# largest count so far. The job stays 20-80 ms (longer while DIR/wanted
# says a count not reached yet: below).
use strict;
use warnings;
use Fcntl qw(:flock);
use FindBin;
use lib $FindBin::Bin;
use Holds qw(comm hold_of);
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my $d = shift or die "usage: crit.pl DIR [linger]\n";
my $linger = (shift // '') eq 'linger';
my $slot = $ENV{AMQPLOCK_SLOT} // 'unset';
my $job = "$$." . int(rand(1e9));

# The fields of a /proc/.../status file, or () if it is gone.
sub status_of {
    open(my $f, '<', $_[0]) or return ();
    return map { /^(\w+):\s*(.*)/ ? ($1, $2) : () } <$f>;
}

# 0: gone, a zombie, or SIGKILL pending; 1: running; 2: stopped. A process
# whose leader is a zombie runs while another of its threads does.
sub running {
    my ($pid) = @_;
    my %st = status_of("/proc/$pid/status") or return 0;
    for my $pending (@st{qw(SigPnd ShdPnd)}) {
        return 0 if defined $pending && hex(substr($pending, -8)) & (1 << 8);    # SIGKILL
    }
    my @states = ($st{State} // 'Z');
    if ($states[0] =~ /^Z/) {
        @states = ();
        for my $task (glob("/proc/$pid/task/*/status")) {
            next if $task eq "/proc/$pid/task/$pid/status";
            my %t = status_of($task);
            push @states, $t{State} if defined $t{State};
        }
    }
    @states = grep { !/^[ZX]/ } @states;
    return 0 unless @states;
    return (grep { !/^[Tt]/ } @states) ? 1 : 2;
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

sub bad { spew("$d/bad", "$_[0]\n", 1) }

my $lock;
sub lock_dir {
    open($lock, '>>', "$d/lock") or die "$d/lock: $!\n";
    # A stop and a SIGCONT (the job-control tests) interrupt the wait:
    # EINTR, which die would turn into exit 4.
    until (flock($lock, LOCK_EX)) { die "flock: $!\n" unless $!{EINTR} }
}
sub unlock_dir { close $lock }

# The entries of processes still inside (running or stopped), as
# [pid, slot, hold, job, running].
sub inside {
    my @e;
    for (split /\n/, slurp("$d/inside", '')) {
        my @f = split ' ';
        my $r = running($f[0]);
        push @e, [@f, $r] if $r;
    }
    return @e;
}

# Jobs whose processes are running, with this one.
sub jobs_running {
    my %jobs = ($job => 1);
    $jobs{ $_->[3] } = 1 for grep { $_->[4] == 1 } @_;
    return scalar keys %jobs;
}

sub bound { my ($b) = slurp("$d/bound", '0') =~ /(\d+)/; return $b }

sub save { spew("$d/inside", join('', map { join(' ', @$_[0 .. 3]) . "\n" } @_)) }

# Continued after a stop: was the slot given away meanwhile?
my $resumed = 0;
$SIG{CONT} = sub { $resumed = 1 };
sub check_resumed {
    return unless $resumed;
    $resumed = 0;
    lock_dir();
    my @e = inside();
    my $owner = slurp("$d/owner.$slot", '');
    bad("$$ of job $job ran again on slot $slot after job $owner entered it") if $owner ne $job;
    my $count = jobs_running(@e);
    bad("$$ of job $job ran again with $count jobs inside, bound ${\bound()}") if $count > bound();
    unlock_dir();
}

# sleeps SECS, checking after each stop
sub stay {
    my $end = clock_gettime(CLOCK_MONOTONIC) + $_[0];
    while ((my $left = $end - clock_gettime(CLOCK_MONOTONIC)) > 0) {
        sleep($left);
        check_resumed();
    }
    check_resumed();
}

sub leave {
    lock_dir();
    save(grep { $_->[0] != $$ } inside());
    unlock_dir();
}

lock_dir();
my $hold = hold_of($$);
bad("crit.pl $$ does not run under amqplock hold: parent ${\getppid()} (${\comm(getppid())})") unless $hold;
my @e = inside();
my $count = jobs_running(@e);
bad("$count inside, bound ${\bound()}") if $count > bound();
for (grep { $_->[4] == 1 && $_->[1] eq $slot } @e) {
    bad("slot $slot taken by $_->[0] of job $_->[3] and $$ of job $job at once");
}
spew("$d/owner.$slot", $job);
push @e, [$$, $slot, $hold, $job];
if ($linger) {
    my $odd = $ENV{CRIT_ODDJOB} && rand() < 1 / 3;
    my $secs = 0.05 + rand(0.35);
    my $pid = fork // die "fork: $!\n";
    if (!$pid) {
        # not the parent's lock: close it unreleased (releasing it here
        # would release the parent's)
        close $lock;
        POSIX::setsid();
        exec($ENV{CRIT_ODDJOB}, 'zombie', '-', $secs) or POSIX::_exit(1) if $odd;
        stay($secs);
        leave();
        POSIX::_exit(0);
    }
    push @e, [$pid, $slot, $hold, $job];
    spew("$d/odd", "$pid\n", 1) if $odd;
}
save(@e);
spew("$d/log", sprintf("%.6f %d %s %d\n", clock_gettime(CLOCK_MONOTONIC), $count, $slot, $$), 1);
# (DIR/most: the most jobs inside at once so far, which the loops of
# tests/lib/helper.bash wait on before they stop)
my $most = (slurp("$d/most", '0') =~ /(\d+)/)[0] // 0;
if ($count > $most) {
    spew("$d/most", "$count\n");
    $most = $count;
}
my ($wanted) = slurp("$d/wanted", '') =~ /(\d+)/;
unlock_dir();

# Until DIR/wanted jobs were inside at once, a job stays 250-500 ms: on a
# loaded machine a hand-over can take longer than 80 ms, and jobs that
# short might never overlap enough for the test to see its slots full.
stay(!defined $wanted || $most >= $wanted ? 0.02 + rand(0.06) : 0.25 + rand(0.25));
leave();
