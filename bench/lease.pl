#!/usr/bin/perl
# lease.pl MODE AMQPLOCK NAME N CTL...: what a lease costs and buys, for
# bench/run.sh. NAME is a 1-slot semaphore with its slot free; CTL... is
# the command line that runs rabbitmqctl against the broker
# (tests/lib/broker.sh ctl DIR).
#
#   reclaim  N rounds: `amqplock --json hold NAME -- sleep 60` takes the
#            slot, every connection of the broker is closed
#            (close_connection), and the hold's "reconnected" event says
#            how long it was away (away_ms: from noticing the loss to the
#            slot re-attached). Prints "n N p50 MS max MS".
#   rate     one hold keeps the slot for N seconds; the frames the broker
#            received on its connection meanwhile (recv_cnt, heartbeats
#            included) are counted. Prints "frames_per_min F".
#
# Every wait is bounded; on failure every process started here is killed
# and the exit status is 1.
use strict;
use warnings;
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my ($mode, $al, $name, $n, @ctl) = @ARGV;
die "usage: lease.pl reclaim|rate AMQPLOCK NAME N CTL...\n"
    unless @ctl && $mode =~ /^(?:reclaim|rate)$/ && $n =~ /^\d+$/ && $n >= 1;

sub now { clock_gettime(CLOCK_MONOTONIC) }

my ($pid, $events);

sub stop_hold {
    return unless $pid;
    kill 'TERM', $pid;
    my $end = now() + 10;
    sleep 0.02 while waitpid($pid, WNOHANG) == 0 && now() < $end;
    kill 'KILL', $pid if waitpid($pid, WNOHANG) == 0;
    undef $pid;
}

sub bail { stop_hold(); die "lease.pl: @_\n" }
$SIG{ALRM} = sub { bail("timed out") };
$SIG{$_} = sub { bail("interrupted") } for qw(INT TERM HUP);

# A hold whose JSON events (on its stderr) come to $events, one per line.
sub start_hold {
    $pid = open($events, '-|') // bail("fork: $!");
    if (!$pid) {
        open(STDERR, '>&', \*STDOUT) or exit 126;
        open(STDOUT, '>', '/dev/null') or exit 126;
        exec($al, '--json', 'hold', $name, '--', 'sleep', '60') or exit 127;
    }
}

# The next event line naming `want`.
sub wait_event {
    my ($want) = @_;
    alarm 30;
    while (my $line = <$events>) {
        if ($line =~ /"event":"(\w+)"/) {
            next unless $1 eq $want;
            alarm 0;
            return $line;
        }
    }
    bail("the hold ended before \"$want\"");
}

sub ctl { my $out = qx(@ctl @_ 2>/dev/null); bail("rabbitmqctl @_ failed") if $?; $out }

if ($mode eq 'reclaim') {
    my @ms;
    for (1 .. $n) {
        start_hold();
        wait_event('acquired');
        sleep 1.2;    # a renewal or two
        for my $conn (split /\n/, ctl('-q', 'list_connections', 'pid', '--no-table-headers')) {
            ctl('close_connection', "'$conn'", 'bench') if $conn =~ /^</;
        }
        my ($away) = wait_event('reconnected') =~ /"away_ms":(\d+)/;
        bail("no away_ms in the reconnected event") unless defined $away;
        push @ms, $away;
        stop_hold();
        close $events;
    }
    @ms = sort { $a <=> $b } @ms;
    printf "n %d p50 %.2f max %.2f\n", scalar @ms, $ms[$#ms / 2], $ms[-1];
} else {
    start_hold();
    wait_event('acquired');
    sleep 2;
    my $count = sub {
        my ($c) = ctl('-q', 'list_connections', 'recv_cnt', '--no-table-headers') =~ /(\d+)/;
        bail("no connection") unless defined $c;
        $c;
    };
    my ($c0, $t0) = ($count->(), now());
    sleep $n;
    my ($c1, $t1) = ($count->(), now());
    stop_hold();
    printf "frames_per_min %.0f\n", 60 * ($c1 - $c0) / ($t1 - $t0);
}
