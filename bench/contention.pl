#!/usr/bin/perl
# contention.pl AMQPLOCK NAME SLOTS HOLDS GAP_MS DIR: how well a busy
# semaphore is used and in what order its waiters are served (issue 17).
# NAME must exist with SLOTS slots, all free. Starts HOLDS processes
#   amqplock -q $CONTENTION_OPTS hold -w 120 NAME -- \
#       sh -c 'exec bench/stamp LOG 0.05 I:$AMQPLOCK_SLOT'
# (another lock's command line instead of `amqplock ... --` if
# CONTENTION_LOCK is set, e.g. "etcdctl lock NAME --"; slot 1 then; "env"
# runs the jobs with no lock at all, for the order they start in alone)
# GAP_MS apart (0: all at once), noting when each was started (its
# arrival), and waits for all of them. bench/stamp logs the start and end
# of each job (CLOCK_MONOTONIC, the clock used here too) to DIR.
#
# Prints one line:
#   holds N slots S util PCT handoff_p50 MS handoff_p99 MS handoff_max MS
#   inversions K pairs P worst_wait S failed F overlaps O
# util: the time jobs ran / (SLOTS x (last job's end - first job's start));
# hand-off: on each slot, a job's start minus the end of the job before it
# on that slot; inversions: pairs of holds that started in the opposite
# order of their arrival, of P pairs; worst_wait: the longest time from
# arrival to the job's start; overlaps: hand-offs below zero, a job
# started on a slot before the one before it there had ended (always 0,
# or the promise is broken). Figures, not assertions: the exit status is
# 1 only when something could not be measured (a hold failed, a wait ran
# out). Every wait is bounded, and every process started here is killed
# on the way out.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC sleep);

my ($al, $name, $slots, $holds, $gap_ms, $dir) = @ARGV;
die "usage: contention.pl AMQPLOCK NAME SLOTS HOLDS GAP_MS DIR\n"
    unless defined $dir && $slots =~ /^\d+$/ && $slots >= 1 && $holds =~ /^\d+$/ &&
    $holds >= 2 && $gap_ms =~ /^\d+(?:\.\d+)?$/;
my $stamp = dirname(abs_path(__FILE__)) . "/stamp";
-x $stamp or die "contention.pl: $stamp is not built (make bench-tools)\n";
my $log = "$dir/contention-$name.log";
unlink $log;

my %kids;    # pid => index, for every hold not reaped yet
my @arrival; # index => when its hold was started
my $failed = 0;

sub now { clock_gettime(CLOCK_MONOTONIC) }

sub cleanup {
    kill 'KILL', keys %kids;
    waitpid($_, 0) for keys %kids;
    %kids = ();
}
$SIG{$_} = sub { cleanup(); exit 1 } for qw(INT TERM HUP);

for my $i (0 .. $holds - 1) {
    my $pid = fork() // do { cleanup(); die "contention.pl: fork: $!\n" };
    if ($pid == 0) {
        open(STDOUT, '>', '/dev/null');
        open(STDERR, '>>', "$dir/contention-$name.err");
        my @lock = $ENV{CONTENTION_LOCK} ? split(' ', $ENV{CONTENTION_LOCK})
            : ($al, '-q', split(' ', $ENV{CONTENTION_OPTS} // ''), 'hold', '-w', '120', $name,
               '--');
        exec(@lock, 'sh', '-c', "exec '$stamp' '$log' 0.05 $i:\${AMQPLOCK_SLOT:-1}")
            or POSIX::_exit(127);
    }
    $arrival[$i] = now();
    $kids{$pid} = $i;
    sleep($gap_ms / 1000) if $gap_ms > 0 && $i < $holds - 1;
}

# Every hold ends within its -w and a job's 50 ms; this is the bound.
my $until = now() + 180;
while (%kids && now() < $until) {
    my $pid = waitpid(-1, WNOHANG);
    if ($pid > 0) {
        $failed++ if exists $kids{$pid} && $? != 0;
        delete $kids{$pid};
    } else {
        sleep(0.01);
    }
}
if (%kids) {
    cleanup();
    die "contention.pl: holds still running after 180 s\n";
}

# start/end per hold, and its slot
my (%start, %end, %slot);
open(my $f, '<', $log) or die "contention.pl: no log: $!\n";
while (<$f>) {
    my ($what, $t, undef, undef, $tag) = split;
    my ($i, $k) = split /:/, $tag;
    ($what eq 'start' ? \%start : \%end)->{$i} = $t;
    $slot{$i} = $k;
}
close $f;
my @done = sort { $start{$a} <=> $start{$b} } grep { exists $end{$_} } keys %start;
die "contention.pl: no job ran\n" unless @done;

my ($busy, $first, $last) = (0, $start{ $done[0] }, 0);
for my $i (@done) {
    $busy += $end{$i} - $start{$i};
    $last = $end{$i} if $end{$i} > $last;
}
my $util = $last > $first ? 100 * $busy / ($slots * ($last - $first)) : 0;

# hand-offs, slot by slot
my (%prev_end, @gaps);
for my $i (@done) {
    my $k = $slot{$i};
    push @gaps, 1000 * ($start{$i} - $prev_end{$k}) if exists $prev_end{$k};
    $prev_end{$k} = $end{$i};
}
@gaps = sort { $a <=> $b } @gaps;
my $pct = sub {
    my ($p) = @_;
    return 0 unless @gaps;
    my $r = int($p / 100 * @gaps + 0.999999);
    $r = 1 if $r < 1;
    return $gaps[ $r - 1 ];
};

# inversions: i arrived before j but started after it
my ($inv, $pairs, $worst) = (0, 0, 0);
my @by_arrival = sort { $a <=> $b } @done;
for my $x (0 .. $#by_arrival) {
    my $i = $by_arrival[$x];
    my $w = $start{$i} - $arrival[$i];
    $worst = $w if $w > $worst;
    for my $y ($x + 1 .. $#by_arrival) {
        $pairs++;
        $inv++ if $start{ $by_arrival[$y] } < $start{$i};
    }
}
printf "holds %d slots %d util %.1f handoff_p50 %.2f handoff_p99 %.2f handoff_max %.2f "
    . "inversions %d pairs %d worst_wait %.2f failed %d overlaps %d\n",
    scalar(@done), $slots, $util, $pct->(50), $pct->(99), @gaps ? $gaps[-1] : 0,
    $inv, $pairs, $worst, $failed + ($holds - @done), scalar(grep { $_ < 0 } @gaps);
exit($failed || @done < $holds ? 1 : 0);
