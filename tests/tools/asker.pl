#!/usr/bin/perl
# asker.pl PORT USER PASS VHOST QUEUE MODE N: publishes N questions "who
# holds?" (as amqplock status does, type amqplock.who) to QUEUE and prints
# how many answers came within 2 s. MODE direct: the answers go to direct
# reply-to, as status's do; foreign: to a queue of this client's own (a
# reply_to that a holder must never publish to), whose message count is
# then printed.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method header next_method expect ss);

@ARGV == 7 or die "usage: asker.pl PORT USER PASS VHOST QUEUE MODE N\n";
my ($port, $user, $pass, $vhost, $queue, $mode, $n) = @ARGV;
login($port, $user, $pass, $vhost);
my $reply_to = "amq.rabbitmq.reply-to";
if ($mode eq "foreign") {
    $reply_to = "asker-$$";
    method(1, 50, 10, pack("n", 0) . ss($reply_to) . "\x04" . pack("N", 0));   # exclusive
    expect(50, 11);
} else {
    method(1, 60, 20, pack("n", 0) . ss($reply_to) . ss("") . "\x02" . pack("N", 0));  # no-ack
    expect(60, 21);
}
# correlation_id (bit 10), reply_to (9), expiration (8), type (5)
my $props = ss("1") . ss($reply_to) . ss("1000") . ss("amqplock.who");
for (1 .. $n) {
    method(1, 60, 40, pack("n", 0) . ss("") . ss($queue) . "\0");
    header(1, (1 << 10) | (1 << 9) | (1 << 8) | (1 << 5), $props);
}
my $answers = 0;
eval {
    local $SIG{ALRM} = sub { die "done\n" };
    alarm 2;
    for (;;) {
        my ($c, $m) = next_method();
        $answers++ if $c == 60 && $m == 60;
    }
};
alarm 0;
if ($mode eq "foreign") {
    method(1, 50, 10, pack("n", 0) . ss($reply_to) . "\x01" . pack("N", 0));   # passive
    my ($name, $messages) = unpack "C/a* N", expect(50, 11);
    $answers = $messages;
}
print "$answers\n";
