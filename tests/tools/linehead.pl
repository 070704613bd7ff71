#!/usr/bin/perl
# linehead.pl PORT QUEUE [--die-holding] [--as USER PASS VHOST]: a first in
# line that is alive but never takes a slot. It joins QUEUE (a semaphore's
# #waiters queue, declared as amqplock declares it: durable, x-expires 60
# s, single active consumer) on the broker at 127.0.0.1:PORT as guest on
# "/", with prefetch 1, prints "ready", and acknowledges every delivery at
# once, until killed; each one it takes appends a line to its stdout
# ("woken TYPE", and " token" if the message names a lease's token). So
# waiters behind it and newcomers see a free slot with a first in line
# that answers, as a real waiter does within milliseconds, and never
# claims: a stray script, or an inspector that may read the line.
# With --die-holding, it exits on the first delivery that is not a
# newcomer's probe instead, without acknowledging it (a waiter killed as it
# was woken): the broker gives the delivery to the next in line, marked as
# delivered before.
# With --as, it logs in as USER (PASS) on VHOST, and only consumes: the
# line must be there (an inspector may not declare it).
# With --ask, it also asks for every lease offered to it, as a first in
# line does (docs/design.md, "Handing the lease over"): an ask into the
# offerer's holder queue, signed with its own login ("asked" on stdout).
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method header next_method expect ss);

my ($port, $queue, @opt) = @ARGV;
defined $queue or die "usage: linehead.pl PORT QUEUE [--die-holding] [--ask] [--as USER PASS VHOST]\n";
my ($die_holding, $ask, @as) = (0, 0);
while (@opt) {
    my $o = shift @opt;
    if ($o eq '--die-holding') { $die_holding = 1 }
    elsif ($o eq '--as') { @as = splice(@opt, 0, 3) }
    elsif ($o eq '--ask') { $ask = 1 }
    else { die "linehead.pl: unknown option $o\n" }
}
login($port, @as ? @as : ("guest", "guest", "/"));
method(1, 60, 10, pack("Nn", 0, 1) . "\0");                       # basic.qos, prefetch 1
expect(60, 11);
unless (@as) {
    my $args = ss("x-expires") . "I" . pack("N", 60000) . ss("x-single-active-consumer") . "t\1";
    method(1, 50, 10, pack("n", 0) . ss($queue) . pack("C", 2) . pack("N/a*", $args)); # durable
    expect(50, 11);
}
method(1, 60, 20, pack("n", 0) . ss($queue) . ss("") . "\0" . pack("N", 0));         # consume
expect(60, 21);
$| = 1;
print "ready\n";
for (;;) {
    my ($c, $m, $a) = next_method();
    die "the broker closed the channel or connection\n" if $m == 40 && ($c == 20 || $c == 10);
    next unless $c == 60 && $m == 60;                             # basic.deliver
    my ($is_probe, $type, $token, $corr, $slot) = content();
    if ($die_holding && !$is_probe) {
        print "died holding\n";
        exit 0;
    }
    my $tag_len = unpack "C", $a;
    my ($hi, $lo) = unpack "NN", substr($a, 1 + $tag_len, 8);
    method(1, 60, 80, pack("NN", $hi, $lo) . "\0");               # basic.ack
    print "woken ", ($type eq "" ? "-" : $type), ($token ? " token" : ""), "\n";
    if ($ask && $type eq "amqplock.offer" && defined $slot) {
        (my $base = $queue) =~ s/#waiters$//;
        my $headers = ss("adopter") . "S" . pack("N/a*", "feedfacefeedface");
        # headers, correlation-id, expiration, type, user-id
        my $props = pack("N/a*", $headers) . ss($corr) . ss("1000") . ss("amqplock.ask")
            . ss(@as ? $as[0] : "guest");
        method(1, 60, 40, pack("n", 0) . ss("") . ss("$base-$slot-B") . "\0");
        header(1, 0x2000 | 0x0400 | 0x0100 | 0x0020 | 0x0010, $props);
        print "asked\n";
    }
}

# content: what the content header that follows a delivery says: whether
# it is a probe of the line (expiration "0"), its type, and whether its
# headers name a token.
sub content {
    for (;;) {
        my ($t, $ch, $len) = unpack "CnN", Amqp::rd(7);
        my $p = Amqp::rd($len);
        Amqp::rd(1);
        next if $t != 2;
        my $f = unpack "n", substr($p, 12, 2);
        my $rest = substr($p, 14);
        my ($expiration, $type, $token, $corr, $slot) = ("", "", 0, "", undef);
        for my $bit (0x8000, 0x4000) { $rest = substr($rest, 1 + unpack("C", $rest)) if $f & $bit }
        if ($f & 0x2000) {
            my $n = unpack "N", $rest;
            my $t = substr($rest, 4, $n);
            $token = index($t, "\x05token") >= 0;
            my $at = index($t, "\x04slotl");
            $slot = unpack("q>", substr($t, $at + 6, 8)) if $at >= 0;
            $rest = substr($rest, 4 + $n);
        }
        $rest = substr($rest, 1) if $f & 0x1000;
        $rest = substr($rest, 1) if $f & 0x0800;
        if ($f & 0x0400) { $corr = unpack("C/a*", $rest); $rest = substr($rest, 1 + length $corr) }
        $rest = substr($rest, 1 + unpack("C", $rest)) if $f & 0x0200;
        if ($f & 0x0100) { $expiration = unpack("C/a*", $rest); $rest = substr($rest, 1 + length $expiration) }
        $rest = substr($rest, 1 + unpack("C", $rest)) if $f & 0x0080;
        $rest = substr($rest, 8) if $f & 0x0040;
        $type = unpack("C/a*", $rest) if $f & 0x0020;
        return ($expiration eq "0", $type, $token, $corr, $slot);
    }
}
