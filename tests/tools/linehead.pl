#!/usr/bin/perl
# linehead.pl PORT QUEUE: a first in line that is alive but never takes a
# slot. It joins QUEUE (a semaphore's #waiters queue, declared as amqplock
# declares it: durable, x-expires 60 s, single active consumer) on the
# broker at 127.0.0.1:PORT as guest, with prefetch 1, prints "ready", and
# acknowledges every wake-up delivered to it at once, until killed; each
# one it takes appends a line to its stdout ("woken"). So waiters behind it
# and newcomers see a free slot with a live first in line: one that
# answers, as a real waiter does within milliseconds.
# A minimal AMQP 0-9-1 client in core perl, without heartbeats.
use strict;
use warnings;
use IO::Socket::INET;

my ($port, $queue) = @ARGV;
defined $queue or die "usage: linehead.pl PORT QUEUE\n";
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port) or die "connect: $!\n";
sub rd {
    my ($n, $b) = (shift, "");
    while (length $b < $n) { sysread($s, $b, $n - length $b, length $b) or die "eof\n" }
    $b;
}
sub method {
    my ($ch, $c, $m, $args) = @_;
    my $p = pack("n2", $c, $m) . $args;
    syswrite $s, pack("CnN", 1, $ch, length $p) . $p . "\xCE";
}
# The next method frame: (class, method, arguments).
sub next_method {
    for (;;) {
        my ($t, $ch, $len) = unpack "CnN", rd(7);
        my $p = rd($len);
        rd(1);
        next if $t != 1;
        my ($c, $m) = unpack "n2", $p;
        return ($c, $m, substr($p, 4));
    }
}
sub expect {
    my ($c, $m) = @_;
    my ($gc, $gm, $args) = next_method();
    return $args if $gc == $c && $gm == $m;
    die "expected method $c.$m, got $gc.$gm\n";
}
sub ss { pack "C/a*", shift }
syswrite $s, "AMQP\0\0\x09\x01";
expect(10, 10);                                                   # start
method(0, 10, 11, pack("N", 0) . ss("PLAIN") . pack("N/a*", "\0guest\0guest") . ss("en_US"));
my ($chmax, $fmax) = unpack "nN", expect(10, 30);                # tune
method(0, 10, 31, pack("nNn", $chmax, $fmax, 0));                 # tune-ok, no heartbeat
method(0, 10, 40, ss("/") . ss("") . "\0");                       # open the vhost
expect(10, 41);
method(1, 20, 10, ss(""));                                        # channel.open
expect(20, 11);
method(1, 60, 10, pack("Nn", 0, 1) . "\0");                       # basic.qos, prefetch 1
expect(60, 11);
my $args = ss("x-expires") . "I" . pack("N", 60000) . ss("x-single-active-consumer") . "t\1";
method(1, 50, 10, pack("n", 0) . ss($queue) . pack("C", 2) . pack("N/a*", $args));   # durable
expect(50, 11);
method(1, 60, 20, pack("n", 0) . ss($queue) . ss("") . "\0" . pack("N", 0));         # consume
expect(60, 21);
$| = 1;
print "ready\n";
for (;;) {
    my ($c, $m, $a) = next_method();
    die "the broker closed the channel or connection\n" if $m == 40 && ($c == 20 || $c == 10);
    next unless $c == 60 && $m == 60;                             # basic.deliver
    my $tag_len = unpack "C", $a;
    my ($hi, $lo) = unpack "NN", substr($a, 1 + $tag_len, 8);
    method(1, 60, 80, pack("NN", $hi, $lo) . "\0");               # basic.ack
    print "woken\n";
}
