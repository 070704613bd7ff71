#!/usr/bin/perl
# linehead.pl PORT QUEUE: a first in line that is alive but never takes a
# slot. It joins QUEUE (a semaphore's #waiters queue, declared as amqplock
# declares it: durable, x-expires 60 s, single active consumer) on the
# broker at 127.0.0.1:PORT as guest, with prefetch 1, prints "ready", and
# acknowledges every wake-up delivered to it at once, until killed; each
# one it takes appends a line to its stdout ("woken"). So waiters behind it
# and newcomers see a free slot with a live first in line: one that
# answers, as a real waiter does within milliseconds.
# With --die-holding, it exits on the first delivery that is not a
# newcomer's probe instead, without acknowledging it (a waiter killed as it
# was woken): the broker gives the delivery to the next in line, marked as
# delivered before.
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method next_method expect ss);

my ($port, $queue, $mode) = @ARGV;
defined $queue or die "usage: linehead.pl PORT QUEUE [--die-holding]\n";
my $die_holding = ($mode // '') eq '--die-holding';
login($port, "guest", "guest", "/");
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
    if ($die_holding && !probe()) {
        print "died holding\n";
        exit 0;
    }
    my $tag_len = unpack "C", $a;
    my ($hi, $lo) = unpack "NN", substr($a, 1 + $tag_len, 8);
    method(1, 60, 80, pack("NN", $hi, $lo) . "\0");               # basic.ack
    print "woken\n";
}

# probe: the content header that follows a delivery says it is a probe of
# the line (expiration "0"). Properties before the expiration: headers,
# correlation-id, reply-to.
sub probe {
    for (;;) {
        my ($t, $ch, $len) = unpack "CnN", Amqp::rd(7);
        my $p = Amqp::rd($len);
        Amqp::rd(1);
        next if $t != 2;
        my $f = unpack "n", substr($p, 12, 2);
        my $rest = substr($p, 14);
        return 0 unless $f & 0x0100;
        $rest = substr($rest, 4 + unpack("N", $rest)) if $f & 0x2000;
        for my $bit (0x0400, 0x0200) {
            $rest = substr($rest, 1 + unpack("C", $rest)) if $f & $bit;
        }
        return unpack("C/a*", $rest) eq "0";
    }
}
