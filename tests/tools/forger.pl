#!/usr/bin/perl
# forger.pl PORT USER PASS PREFIXNAME SLOT LEASE_MS QUORUM GROUP1: a client
# of the holders' own login that tries to hand a live holder's lease to
# the first in line (docs/design.md, "Handing the lease over"), on the
# broker at 127.0.0.1:PORT as USER. PREFIXNAME is the semaphore's queue
# name base ("amqplock.jobs"); QUORUM 1 if the lease is a quorum queue,
# GROUP1 1 if it was declared with x-quorum-initial-group-size 1 (a quorum
# lease of classic slots).
#  1. It reads the lease's token from the text of a refusal: a declare of
#     PREFIXNAME-SLOT-L with every argument but x-max-length as the lease
#     has them is refused 406, "... received '1' but current is 'TOKEN'".
#  2. As an amqplock 0.3.0 releaser would: an offer of that lease, token
#     and all, to the line, its reply-to this connection's direct reply-to;
#     then, if the first in line answers "adopted" with its id, a
#     "confirmed" naming that id.
#  3. As this amqplock's releaser would: an offer without the token; then
#     an answer handing the lease over ("handed") with the token, naming a
#     guessed adopter id (the real one goes only into the holder's queue).
# Prints "token TOKEN", then "old: REPLY" (the type of the first reply to
# the 0.3.0 offer within 3 s, or "old: none") and "old: confirmed" if it
# confirmed, then "new: sent". Exits 0. Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method header next_method expect ss);

my ($port, $user, $pass, $base, $slot, $ms, $quorum, $group1) = @ARGV;
defined $group1 or die "usage: forger.pl PORT USER PASS PREFIXNAME SLOT LEASE_MS QUORUM GROUP1\n";
login($port, $user, $pass, "/");
$| = 1;

my $i64 = sub { ss($_[0]) . "l" . pack("q>", $_[1]) };
my $str = sub { ss($_[0]) . "S" . pack("N/a*", $_[1]) };

# 1. The token, from a refusal (on channel 2, which it closes).
method(2, 20, 10, ss(""));
expect(20, 11);
my $args = $i64->("x-expires", $ms) . $i64->("x-max-length", 1);
$args .= $str->("x-queue-type", "quorum") if $quorum;
$args .= $i64->("x-quorum-initial-group-size", 1) if $group1;
method(2, 50, 10, pack("n", 0) . ss("$base-$slot-L") . pack("C", 2) . pack("N/a*", $args));
my ($c, $m, $a) = next_method();
die "the declare was not refused: $c.$m\n" unless $c == 20 && $m == 40;
my (undef, $text) = unpack "n C/a*", $a;
my ($token) = $text =~ /current is '(\d+)'/ or die "no token in: $text\n";
method(2, 20, 41, "");
print "token $token\n";

# Direct reply-to on channel 1: consumed (no-ack) before publishing with it.
method(1, 60, 20, pack("n", 0) . ss("amq.rabbitmq.reply-to") . ss("") . "\x02" . pack("N", 0));
expect(60, 21);

# publish TYPE CORRELATION HEADERS [REPLY_TO]: an empty note to the line,
# signed with our login.
sub publish {
    my ($type, $corr, $headers, $reply_to) = @_;
    my $flags = 0x2000 | 0x0400 | ($reply_to ? 0x0200 : 0) | 0x0100 | 0x0020 | 0x0010;
    my $props = pack("N/a*", $headers) . ss($corr) . ($reply_to ? ss($reply_to) : "")
        . ss("5000") . ss($type) . ss($user);
    method(1, 60, 40, pack("n", 0) . ss("") . ss("$base#waiters") . "\0");
    header(1, $flags, $props);
}

# A table's entries that this needs: long strings and 64-bit integers.
sub table {
    my ($t, %h) = (shift);
    while (length $t) {
        my $k = unpack "C/a*", $t;
        $t = substr($t, 1 + length $k);
        my $type = substr($t, 0, 1, "");
        if ($type eq "S") { $h{$k} = unpack "N/a*", $t; $t = substr($t, 4 + length $h{$k}) }
        elsif ($type eq "l") { $h{$k} = unpack "q>", $t; $t = substr($t, 8) }
        else { last }
    }
    %h;
}

# The next delivery's type and headers, within `wait` seconds: ("", {})
# if none.
sub delivery {
    my $wait = shift;
    my $sock = Amqp::sock();
    my $end = time + $wait;
    my $rin = '';
    vec($rin, fileno($sock), 1) = 1;
    while (time < $end) {
        next unless select(my $rout = $rin, undef, undef, 0.1);
        my ($t, $ch, $len) = unpack "CnN", Amqp::rd(7);
        my $p = Amqp::rd($len);
        Amqp::rd(1);
        next unless $t == 2;
        my $f = unpack "n", substr($p, 12, 2);
        my $rest = substr($p, 14);
        my %h;
        for my $bit (0x8000, 0x4000) { $rest = substr($rest, 1 + unpack("C", $rest)) if $f & $bit }
        if ($f & 0x2000) {
            my $n = unpack "N", $rest;
            %h = table(substr($rest, 4, $n));
            $rest = substr($rest, 4 + $n);
        }
        $rest = substr($rest, 1) if $f & 0x1000;
        $rest = substr($rest, 1) if $f & 0x0800;
        for my $bit (0x0400, 0x0200, 0x0100, 0x0080) {
            $rest = substr($rest, 1 + unpack("C", $rest)) if $f & $bit;
        }
        $rest = substr($rest, 8) if $f & 0x0040;
        my $type = $f & 0x0020 ? unpack("C/a*", $rest) : "";
        return ($type, \%h);
    }
    return ("", {});
}

# 2. As an amqplock 0.3.0 releaser.
my $lease = $i64->("slot", $slot) . $i64->("lease-ms", $ms) . $i64->("quorum", $quorum ? 1 : 0);
publish("amqplock.offer", "forged-old-$$", $lease . $i64->("token", $token), "amq.rabbitmq.reply-to");
my ($type, $h) = delivery(3);
print "old: ", ($type || "none"), "\n";
if ($type eq "amqplock.adopted" && defined $h->{adopter}) {
    publish("amqplock.confirmed", "forged-old-$$", $str->("adopter", $h->{adopter}));
    print "old: confirmed\n";
}

# 3. As this amqplock's releaser, the answer's id guessed.
publish("amqplock.offer", "forged-new-$$", $lease);
select(undef, undef, undef, 0.05);
publish("amqplock.handed", "forged-new-$$", $str->("adopter", sprintf("%016x", $$)) . $i64->("token", $token));
print "new: sent\n";
# (time for a waiter to act on it before the connection goes)
select(undef, undef, undef, 0.5);
