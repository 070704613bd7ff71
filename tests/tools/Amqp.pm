# Amqp.pm: a minimal AMQP 0-9-1 client in core perl, without heartbeats,
# for the suites' raw clients (holdq.pl, linehead.pl): connect and log in
# to 127.0.0.1:PORT, send methods, read them.
package Amqp;
use strict;
use warnings;
use IO::Socket::INET;
use Exporter 'import';
our @EXPORT_OK = qw(login method header next_method expect ss);

my $s;

sub rd {
    my ($n, $b) = (shift, "");
    while (length $b < $n) { sysread($s, $b, $n - length $b, length $b) or die "eof\n" }
    $b;
}

# method CHANNEL CLASS METHOD ARGS: sends one method frame.
sub method {
    my ($ch, $c, $m, $args) = @_;
    my $p = pack("n2", $c, $m) . $args;
    syswrite $s, pack("CnN", 1, $ch, length $p) . $p . "\xCE";
}

# header CHANNEL FLAGS PROPERTIES: a basic content header with an empty
# body (no body frame follows), its property flags and encoded properties.
sub header {
    my ($ch, $flags, $props) = @_;
    my $p = pack("nnNNn", 60, 0, 0, 0, $flags) . $props;
    syswrite $s, pack("CnN", 2, $ch, length $p) . $p . "\xCE";
}

# next_method: the next method frame, as (class, method, arguments);
# content and heartbeat frames are skipped.
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

# expect CLASS METHOD: the arguments of the next method, which must be it.
sub expect {
    my ($c, $m) = @_;
    my ($gc, $gm, $args) = next_method();
    return $args if $gc == $c && $gm == $m;
    die "expected method $c.$m, got $gc.$gm\n";
}

# A short string.
sub ss { pack "C/a*", shift }

# The socket, for select(2).
sub sock { $s }

# login PORT USER PASS VHOST: connected, logged in, channel 1 open.
sub login {
    my ($port, $user, $pass, $vhost) = @_;
    $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port) or die "connect: $!\n";
    syswrite $s, "AMQP\0\0\x09\x01";
    expect(10, 10);                                               # start
    method(0, 10, 11, pack("N", 0) . ss("PLAIN") . pack("N/a*", "\0$user\0$pass") . ss("en_US"));
    my ($chmax, $fmax) = unpack "nN", expect(10, 30);             # tune
    method(0, 10, 31, pack("nNn", $chmax, $fmax, 0));             # tune-ok, no heartbeat
    method(0, 10, 40, ss($vhost) . ss("") . "\0");                # open the vhost
    expect(10, 41);
    method(1, 20, 10, ss(""));                                    # channel.open
    expect(20, 11);
}

1;
