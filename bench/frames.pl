#!/usr/bin/perl
# frames.pl PORTFILE TARGET_PORT OUT: a relay on 127.0.0.1 (its port written
# to PORTFILE) to the broker on 127.0.0.1:TARGET_PORT that counts the AMQP
# frames it passes, to tell what a whole command costs the broker. On
# SIGTERM it writes to OUT one line
#   connections C to_broker_methods M to_broker_messages P
#   from_broker_methods R from_broker_messages D heartbeats H
# (messages: content headers, i.e. publishes one way and deliveries or
# returns the other; heartbeats both ways) and exits. It parses only
# frame boundaries (type, channel, size); the protocol header that opens
# each connection is skipped.
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Socket qw(IPPROTO_TCP TCP_NODELAY);

my ($portfile, $target, $out) = @ARGV;
die "usage: frames.pl PORTFILE TARGET_PORT OUT\n" unless defined $out;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 256,
                              ReuseAddr => 1) or die "listen: $!\n";
open(my $f, ">", "$portfile.tmp") or die "$portfile.tmp: $!\n";
print $f $l->sockport, "\n";
close $f;
rename "$portfile.tmp", $portfile or die "rename: $!\n";

my %count = map { $_ => 0 } qw(connections to_broker_methods to_broker_messages
    from_broker_methods from_broker_messages heartbeats);
my $done = 0;
$SIG{TERM} = sub { $done = 1 };

my $sel = IO::Select->new($l);
my (%peer, %pending, %to_broker);
sub drop {
    my $s = shift;
    my $o = delete $peer{$s};
    for my $x ($s, $o) {
        next unless $x;
        delete $peer{$x};
        delete $pending{$x};
        delete $to_broker{$x};
        $sel->remove($x);
        close $x;
    }
}

# Counts the whole frames at the start of the bytes read from $s so far.
sub count_frames {
    my $s = shift;
    my $dir = $to_broker{$s} ? "to_broker" : "from_broker";
    if ($to_broker{$s} && $to_broker{$s} == 1) {
        return if length $pending{$s} < 8;
        substr($pending{$s}, 0, 8, "");    # "AMQP\0\0\x09\x01"
        $to_broker{$s} = 2;
    }
    while (length $pending{$s} >= 7) {
        my ($type, undef, $size) = unpack("CnN", $pending{$s});
        last if length $pending{$s} < 8 + $size;
        substr($pending{$s}, 0, 8 + $size, "");
        if ($type == 1) { $count{"${dir}_methods"}++ }
        elsif ($type == 2) { $count{"${dir}_messages"}++ }
        elsif ($type == 8) { $count{heartbeats}++ }
    }
}

until ($done) {
    for my $s ($sel->can_read(0.2)) {
        if ($s == $l) {
            my $c = $l->accept or next;
            my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $target);
            if (!$u) { close $c; next }
            # As the client and the broker do: no Nagle delays here.
            setsockopt($_, IPPROTO_TCP, TCP_NODELAY, 1) for $c, $u;
            $count{connections}++;
            @peer{$c, $u} = ($u, $c);
            @pending{$c, $u} = ("", "");
            $to_broker{$c} = 1;
            $sel->add($c, $u);
            next;
        }
        next unless $peer{$s};
        my $buf;
        my $n = sysread($s, $buf, 65536);
        if (!$n) { drop($s); next }
        $pending{$s} .= $buf;
        count_frames($s);
        my ($o, $off) = ($peer{$s}, 0);
        while ($off < $n) {
            my $w = syswrite($o, $buf, $n - $off, $off);
            if (!defined $w) { drop($s); last }
            $off += $w;
        }
    }
}
open(my $o, ">", $out) or die "$out: $!\n";
print $o join(" ", map { "$_ $count{$_}" } qw(connections to_broker_methods to_broker_messages
    from_broker_methods from_broker_messages heartbeats)), "\n";
close $o;
