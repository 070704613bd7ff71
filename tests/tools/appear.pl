#!/usr/bin/perl
# appear.pl PORT queue|exchange NAME PID [SECS]: asks the broker on
# 127.0.0.1:PORT (guest/guest, vhost /) every 2 ms whether the queue or
# exchange NAME exists (a passive declare), and the moment it does sends
# SIGKILL to PID and prints "killed": an administrator stopped at a point
# the test can name ("once slot queue 50 is made"), not after a guess of a
# sleep. Exits 1 if PID ends first, or after SECS (default 60).
# PID may be @FILE: then appear.pl logs in first, creates FILE.ready, and
# reads the pid from FILE once it is there, so that the command it watches
# can be started after it is ready (a busy machine may take longer to
# start perl and log in than a small create takes).
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Time::HiRes qw(sleep time);
use Amqp qw(login method expect next_method ss);

my ($port, $kind, $name, $pid, $secs) = @ARGV;
die "usage: appear.pl PORT queue|exchange NAME PID [SECS]\n"
    unless defined $pid && $kind =~ /^(queue|exchange)$/;
my $end = time + ($secs // 60);
login($port, "guest", "guest", "/");
$| = 1;
if ($pid =~ s/^@//) {
    my $file = $pid;
    open(my $r, '>', "$file.ready") or die "appear.pl: $file.ready: $!\n";
    close $r;
    $pid = '';
    while ($pid !~ /^[0-9]+$/) {
        exit 1 if time >= $end;
        sleep 0.001;
        if (open(my $f, '<', $file)) {
            $pid = <$f> // '';
            chomp $pid;
        }
    }
}
my $ch = 1;
while (time < $end) {
    exit 1 unless kill 0, $pid;
    if ($kind eq "queue") {                                       # queue.declare, passive
        method($ch, 50, 10, pack("n", 0) . ss($name) . pack("CN", 1, 0));
    } else {                                                      # exchange.declare, passive
        method($ch, 40, 10, pack("n", 0) . ss($name) . ss("fanout") . pack("CN", 1, 0));
    }
    my ($c, $m) = next_method();
    if (($c == 50 || $c == 40) && $m == 11) {
        kill 'KILL', $pid;
        print "killed\n";
        exit 0;
    }
    die "unexpected method $c.$m\n" unless $c == 20 && $m == 40;  # channel.close: 404
    method($ch, 20, 41, "");                                      # close-ok
    $ch = $ch % 1000 + 1;                                         # a fresh channel
    method($ch, 20, 10, ss(""));
    expect(20, 11);
    sleep 0.002;
}
exit 1;
