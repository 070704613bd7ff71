#!/usr/bin/perl
# handoff.pl MODE AMQPLOCK NAME ROUNDS WAITERS DIR: hand-off latency of the
# 1-slot semaphore NAME (it must exist with its slot free), for
# bench/run.sh. Every CMD is bench/stamp (stamp.c), which logs CLOCK_MONOTONIC
# times of its start and (just before exiting) its end to DIR/handoff-MODE.log.
#
#   clean  each round: `amqplock acquire NAME` takes the slot; WAITERS
#          `amqplock hold -w 60 NAME -- stamp LOG 0.05` queue up behind it
#          (2 s to settle); the acquire gets SIGTERM (its time logged just
#          before the kill) and each CMD holds 50 ms and exits, which releases
#          the slot to the next waiter. Gap: a CMD's start minus the latest
#          release before it (the SIGTERM, or the previous CMD's end).
#   kill   one hold whose CMD sleeps holds the slot, WAITERS wait; the hold
#          process of the current holder (the parent of CMD's keeper) is killed with
#          SIGKILL (time logged just before), each new holder in turn once
#          its CMD has started. Gap: CMD start minus the kill. ROUNDS is
#          ignored (one round of WAITERS hand-offs).
#
# Prints one line: "n N p50 MS p99 MS min MS max MS overlaps K" (p50: the
# median; p99: nearest rank; overlaps: starts that found the slot's last
# release already taken by another start, which should be 0). Every wait
# is bounded; on any failure or signal every process started here is
# killed and the exit status is 1.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my ($mode, $al, $name, $rounds, $waiters, $dir) = @ARGV;
die "usage: handoff.pl clean|kill AMQPLOCK NAME ROUNDS WAITERS DIR\n"
    unless defined $dir && $mode =~ /^(?:clean|kill)$/ && $rounds =~ /^\d+$/ &&
    $waiters =~ /^\d+$/ && $waiters >= 1;
my $stamp = dirname(abs_path(__FILE__)) . "/stamp";
my $log = "$dir/handoff-$mode.log";
my $errlog = "$dir/handoff-$mode.err";
unlink $log, $errlog;

my %kids;    # pid => what, for every process not reaped yet
my $me = $$;

sub now { clock_gettime(CLOCK_MONOTONIC) }

sub killall {
    return unless $$ == $me;
    kill 'TERM', keys %kids if %kids;
    my $end = now() + 3;
    while (%kids && now() < $end) {
        for my $p (keys %kids) { delete $kids{$p} if waitpid($p, WNOHANG) != 0 }
        sleep 0.02;
    }
    kill 'KILL', keys %kids if %kids;
    for my $p (keys %kids) { waitpid($p, 0) }
    %kids = ();
}
END { my $rc = $?; killall(); $? = $rc }
$SIG{$_} = sub { exit 1 } for qw(INT TERM HUP);

sub fail {
    my $msg = shift;
    if (-s $errlog) {
        open(my $f, '<', $errlog);
        my @l = <$f>;
        print STDERR "handoff.pl: stderr of the amqplock processes (last lines):\n",
            @l[($#l > 9 ? $#l - 9 : 0) .. $#l];
    }
    die "handoff.pl: $msg\n";
}

sub note {
    open(my $f, '>>', $log) or fail("$log: $!");
    syswrite $f, shift;
    close $f;
}

# spawn WHAT STDOUT CMD...: CMD in the background, stdin /dev/null, stderr
# appended to $errlog; signals that a non-interactive shell may have set to
# ignored are reset.
sub spawn {
    my ($what, $out, @cmd) = @_;
    my $pid = fork() // fail("fork: $!");
    if ($pid == 0) {
        $SIG{$_} = 'DEFAULT' for qw(INT TERM HUP QUIT);
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', $out // '/dev/null');
        open(STDERR, '>>', $errlog);
        exec(@cmd) or POSIX::_exit(127);
    }
    $kids{$pid} = $what;
    return $pid;
}

# reap DEADLINE PIDS...: waits until every one of PIDS has ended; returns
# { pid => wait status }.
sub reap {
    my ($deadline, @pids) = @_;
    my %st;
    for (;;) {
        for my $p (@pids) {
            next if exists $st{$p};
            my $r = waitpid($p, WNOHANG);
            if ($r == $p || $r == -1) { $st{$p} = $r == -1 ? -1 : $?; delete $kids{$p} }
        }
        last if keys %st == @pids;
        fail("processes still running at the deadline") if now() > $deadline;
        sleep 0.005;
    }
    return \%st;
}

my $offset = 0;
my @events;    # [kind, t, pid, ppid, tag]

sub read_events {
    open(my $f, '<', $log) or return;
    seek($f, $offset, 0);
    while (my $l = <$f>) {
        last unless $l =~ /\n\z/;
        $offset += length $l;
        push @events, [split ' ', $l];
    }
}

sub count_starts { scalar grep { $_->[0] eq 'start' } @events }

# until_starts N DEADLINE: waits until N CMDs have started.
sub until_starts {
    my ($n, $deadline) = @_;
    for (;;) {
        read_events();
        return if count_starts() >= $n;
        fail("only " . count_starts() . " of $n commands started in time") if now() > $deadline;
        sleep 0.002;
    }
}

sub still_running {
    for my $p (@_) { fail("a waiter ended before its turn") if waitpid($p, WNOHANG) != 0 }
}

# stamped_hold ROLE WAIT SECS TAG: `amqplock hold -w WAIT NAME -- stamp LOG
# SECS TAG` in the background; its pid.
sub stamped_hold {
    my ($role, $wait, $secs, $tag) = @_;
    return spawn($role, undef, $al, 'hold', '-w', $wait, $name, '--', $stamp, $log, $secs, $tag);
}

if ($mode eq 'clean') {
    for my $r (1 .. $rounds) {
        my $out = "$dir/handoff-acquire.out";
        unlink $out;
        my $acq = spawn('acquire', $out, $al, 'acquire', '-w', '30', $name);
        my $deadline = now() + 30;
        until (-s $out) {
            fail("acquire ended without a slot") if waitpid($acq, WNOHANG) != 0;
            fail("acquire got no slot in 30 s") if now() > $deadline;
            sleep 0.01;
        }
        my @w = map { stamped_hold('waiter', 60, 0.05, "r$r") } 1 .. $waiters;
        sleep 2;
        still_running(@w);
        note(sprintf("release %.6f 0 0 r%d\n", now(), $r));
        kill 'TERM', $acq;
        my $st = reap(now() + 120, $acq, @w);
        my $bad = grep { $st->{$_} != 0 } @w;
        fail("$bad of $waiters waiters did not exit 0") if $bad;
    }
} else {
    my $first = stamped_hold('holder', 30, 300, 'k0');
    until_starts(1, now() + 30);
    my @w = map { stamped_hold('waiter', 120, 300, "k$_") } 1 .. $waiters;
    sleep 2;
    still_running(@w);
    # CMD's parent is the hold's keeper (amqp-keeper); the hold is the
    # keeper's parent.
    my $hold_of = sub {
        my ($pid) = @_;
        return $pid if $kids{$pid};
        open(my $f, '<', "/proc/$pid/stat") or return $pid;
        my ($ppid) = (scalar <$f>) =~ /\)\s+\S+\s+(\d+)/;
        return $ppid // $pid;
    };
    for my $i (1 .. $waiters) {
        my ($cur) = grep { $_->[0] eq 'start' } reverse @events;
        my $holder = $hold_of->($cur->[3]);
        fail("the current holder $holder is not one of ours") unless $kids{$holder};
        sleep 0.05;
        note(sprintf("release %.6f 0 0 kill%d\n", now(), $i));
        kill 'KILL', $holder;
        until_starts($i + 1, now() + 30);
        reap(now() + 10, $holder);
    }
    my ($last) = grep { $_->[0] eq 'start' } reverse @events;
    kill 'KILL', $hold_of->($last->[3]);
    reap(now() + 10, $first, @w);
}

read_events();
my (@gaps, $last_release, $used);
my $overlaps = 0;
for my $e (sort { $a->[1] <=> $b->[1] } @events) {
    if ($e->[0] eq 'start') {
        next unless defined $last_release;
        if ($used) { $overlaps++; next }
        push @gaps, ($e->[1] - $last_release) * 1000;
        $used = 1;
    } else {
        ($last_release, $used) = ($e->[1], 0);
    }
}
fail("no hand-off measured") unless @gaps;
open(my $g, '>', "$dir/handoff-$mode.gaps") or fail("$!");
print $g map { sprintf("%.3f\n", $_) } @gaps;
close $g;
my @s = sort { $a <=> $b } @gaps;
my $n = @s;
my $p50 = $n % 2 ? $s[$n / 2] : ($s[$n / 2 - 1] + $s[$n / 2]) / 2;
my $i99 = int(0.99 * $n + 0.999999) - 1;
printf "n %d p50 %.3f p99 %.3f min %.3f max %.3f overlaps %d\n", $n, $p50, $s[$i99], $s[0],
    $s[-1], $overlaps;
exit 0;
