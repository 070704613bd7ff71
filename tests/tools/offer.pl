#!/usr/bin/perl
# offer.pl PORT USER PASS QUEUE SLOT TOKEN LEASE_MS QUORUM [SIGN_AS]: a
# forged offer of a lease (docs/design.md, "Handing the lease over"),
# published to QUEUE (a semaphore's #waiters line) on the broker at
# 127.0.0.1:PORT as USER: type amqplock.offer, the slot, token, length and
# type of a lease in its headers, a nonce, and its reply-to this
# connection's direct reply-to. With SIGN_AS, its user_id says SIGN_AS.
# Prints "sent", then what comes back first within 3 s: the type of the
# reply ("amqplock.declined", "amqplock.adopted"), or "closed CODE" if the
# broker closed the channel (a user_id that is not USER's: 406). Exits 0.
# TOKEN "-": an offer in this amqplock's form, which names no token and no
# reply-to (the first in line asks the holder's own holder queue).
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method header ss);

my ($port, $user, $pass, $queue, $slot, $token, $ms, $quorum, $sign_as) = @ARGV;
defined $quorum or die "usage: offer.pl PORT USER PASS QUEUE SLOT TOKEN LEASE_MS QUORUM [SIGN_AS]\n";
login($port, $user, $pass, "/");
$| = 1;

# Direct reply-to: consumed (no-ack) before publishing with it.
method(1, 60, 20, pack("n", 0) . ss("amq.rabbitmq.reply-to") . ss("") . "\x02" . pack("N", 0));
my $i64 = sub { ss($_[0]) . "l" . pack("q>", $_[1]) };
my $old = $token ne "-";
my $headers = $i64->("slot", $slot) . $i64->("lease-ms", $ms) . $i64->("quorum", $quorum)
    . ($old ? $i64->("token", $token) : "");
# Properties in their order: headers, correlation-id, reply-to,
# expiration, type, user-id.
my $flags = 0x2000 | 0x0400 | ($old ? 0x0200 : 0) | 0x0100 | 0x0020
    | (defined $sign_as ? 0x0010 : 0);
my $props = pack("N/a*", $headers) . ss("forged$$") . ($old ? ss("amq.rabbitmq.reply-to") : "")
    . ss("5000") . ss("amqplock.offer") . (defined $sign_as ? ss($sign_as) : "");
method(1, 60, 40, pack("n", 0) . ss("") . ss($queue) . "\0");
header(1, $flags, $props);
print "sent\n";

# Frames until a reply or the channel's close, for 3 s at most.
my $sock = Amqp::sock();
my $end = time + 3;
my $rin = '';
vec($rin, fileno($sock), 1) = 1;
while (time < $end) {
    my $ready = select(my $rout = $rin, undef, undef, 0.2);
    next unless $ready;
    my ($t, $ch, $len) = unpack "CnN", Amqp::rd(7);
    my $p = Amqp::rd($len);
    Amqp::rd(1);
    if ($t == 1) {
        my ($c, $m) = unpack "n2", $p;
        if ($c == 20 && $m == 40) {
            my $code = unpack "n", substr($p, 4, 2);
            print "closed $code\n";
            last;
        }
    } elsif ($t == 2) {
        my ($class, undef, undef, undef, $f) = unpack "nnNNn", $p;
        my $rest = substr($p, 14);
        # Skip to the type: headers, correlation-id, reply-to,
        # expiration, message-id, timestamp come first when present.
        $rest = substr($rest, 4 + unpack("N", $rest)) if $f & 0x2000;
        for my $bit (0x0400, 0x0200, 0x0100, 0x0080) {
            $rest = substr($rest, 1 + unpack("C", $rest)) if $f & $bit;
        }
        $rest = substr($rest, 8) if $f & 0x0040;
        if ($f & 0x0020) {
            print unpack("C/a*", $rest), "\n";
            last;
        }
    }
}
