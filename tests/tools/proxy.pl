#!/usr/bin/perl
# proxy.pl PORTFILE TARGET_PORT [COUNTS]: relays every TCP connection made
# to a port of its own on 127.0.0.1 (written to PORTFILE once it listens) to
# 127.0.0.1:TARGET_PORT. A single process, so that SIGSTOP makes the broker
# fall silent for every client connected through it (and SIGCONT ends that).
#
# With COUNTS (make bench: what a command costs the broker), it also counts
# the AMQP frames it passes, and on SIGTERM writes to COUNTS one line
#   connections C to_broker_methods M to_broker_messages P
#   from_broker_methods R from_broker_messages D heartbeats H
# (messages: content headers, i.e. publishes one way, deliveries and
# returns the other) and exits. Only frame boundaries are parsed; the
# protocol header that opens each connection is skipped.
#
# With AMQPLOCK_RELAY_STALL=TEXT in the environment, the first connection
# whose client sends TEXT gets nothing more from the broker (what the broker
# sends it is dropped); the client's requests still go through. Later
# connections are relayed as usual. TEXT may hold bytes as \xNN (a frame's
# class and method ids, say). The moment the stall begins is written to
# stderr as "stalled at SECONDS" (since the epoch, as bash's
# EPOCHREALTIME) for a test to time what follows.
#
# With AMQPLOCK_RELAY_HOLD="TEXT SECONDS", the first connection whose client
# sends TEXT gets what the broker sends it SECONDS late: held back from
# then on, and passed on, in order, once SECONDS have gone by; relayed as
# usual after. To the client that is a pause of SECONDS right after it
# sent TEXT (a stopped process, a paused VM), while the broker and the
# other clients go on. With a third word, UNTIL, held back until the
# bytes held back hold UNTIL too (something the broker sends that client
# on another's word, say).
#
# With AMQPLOCK_RELAY_CLOSE="TEXT CODE", the first connection whose client
# sends TEXT is closed as the broker closes one: what it sent with TEXT is
# not passed on, the broker's side is closed (the broker sees the client
# go), and the client gets a connection.close with reply code CODE, as
# RabbitMQ 4.3 sends one (RESOURCE_ERROR, 506) when a publish finds its
# queue deleted between routing and delivery. "closed at SECONDS" goes to
# stderr.
#
# SIGUSR1 cuts every connection on the broker's side only: the broker sees
# its clients go, each client's socket stays open and silent, and what the
# broker had sent stays in it to be read: as a client finds its connection
# after a long stop, before it learns that the broker dropped it.
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Socket qw(IPPROTO_TCP TCP_NODELAY);

my ($portfile, $target, $counts) = @ARGV;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 256,
                              ReuseAddr => 1) or die "listen: $!\n";
open(my $f, ">", "$portfile.tmp") or die "$portfile.tmp: $!\n";
print $f $l->sockport, "\n";
close $f;
rename "$portfile.tmp", $portfile or die "rename: $!\n";

my @kinds = qw(connections to_broker_methods to_broker_messages from_broker_methods
    from_broker_messages heartbeats);
my %count = map { $_ => 0 } @kinds;
my $done = 0;
$SIG{TERM} = sub { $done = 1 } if defined $counts;

my $sel = IO::Select->new($l);
my (%peer, %pending, %client, %stalled, %held, %heldbuf, @cut);
my $stall = $ENV{AMQPLOCK_RELAY_STALL};
$stall =~ s/\\x([0-9a-fA-F]{2})/chr(hex($1))/ge if defined $stall;
my ($hold, $hold_for, $hold_until) = split ' ', ($ENV{AMQPLOCK_RELAY_HOLD} // '');
my ($close, $close_code) = split ' ', ($ENV{AMQPLOCK_RELAY_CLOSE} // '');
$close =~ s/\\x([0-9a-fA-F]{2})/chr(hex($1))/ge if defined $close;
my %closing;
use Time::HiRes qw(time);
# A connection.close of reply code $code, frame and all, on channel 0.
sub close_frame {
    my ($code, $text) = @_;
    my $args = pack("nnnC", 10, 50, $code, length $text) . $text . pack("nn", 60, 40);
    return pack("CnN", 1, 0, length $args) . $args . "\xCE";
}
# Passes on what was held back for a connection whose time has come.
sub release_held {
    for my $o (grep { $held{$_}[1] <= time } keys %held) {
        next if defined $hold_until && index($heldbuf{$o} // '', $hold_until) < 0;
        my $sock = $held{$o}[0];
        delete $held{$o};
        my $buf = delete $heldbuf{$o} // '';
        my $off = 0;
        while ($off < length $buf) {
            my $w = syswrite($sock, $buf, length($buf) - $off, $off);
            last unless defined $w;
            $off += $w;
        }
    }
}
my $cut = 0;
$SIG{USR1} = sub { $cut = 1 };
# Closes the broker's side of every connection; keeps the clients' sides.
sub cut_all {
    for my $c (grep { exists $client{$_} } keys %client) {
        my ($cs, $u) = ($c, $peer{$c});
        next unless $u;
        # (keys are strings: find the socket itself)
        ($cs) = grep { $_ eq $c } $sel->handles;
        $sel->remove($u, $cs);
        close $u;
        push @cut, $cs;
        delete @peer{$c, $u};
    }
    %client = ();
    $cut = 0;
}
sub drop {
    my $s = shift;
    my $o = delete $peer{$s};
    for my $x ($s, $o) {
        next unless $x;
        delete $peer{$x};
        delete $pending{$x};
        delete $client{$x};
        delete $stalled{$x};
        $sel->remove($x);
        close $x;
    }
}

# Counts the whole frames among the bytes read from $s so far. $client{$s}
# is 1 for a client's socket until its protocol header has gone by.
sub count_frames {
    my $s = shift;
    my $dir = exists $client{$s} ? "to_broker" : "from_broker";
    if (exists $client{$s} && $client{$s} == 1) {
        return if length $pending{$s} < 8;
        substr($pending{$s}, 0, 8, "");
        $client{$s} = 2;
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
    cut_all() if $cut;
    release_held();
    for my $s ($sel->can_read(%held ? 0.01 : 0.2)) {
        if ($s == $l) {
            my $c = $l->accept or next;
            my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $target);
            if (!$u) { close $c; next }
            # As the client and the broker do: no Nagle delays here.
            setsockopt($_, IPPROTO_TCP, TCP_NODELAY, 1) for $c, $u;
            $count{connections}++;
            @peer{$c, $u} = ($u, $c);
            @pending{$c, $u} = ("", "");
            $client{$c} = 1;
            $sel->add($c, $u);
            next;
        }
        if ($closing{$s}) {
            # (what the client says after its close: read and dropped)
            my $n = sysread($s, my $rest, 65536);
            if (!$n) { delete $closing{$s}; $sel->remove($s); close $s }
            next;
        }
        next unless $peer{$s};
        my $buf;
        my $n = sysread($s, $buf, 65536);
        if (!$n) { drop($s); next }
        if (defined $counts) {
            $pending{$s} .= $buf;
            count_frames($s);
        }
        my ($o, $off) = ($peer{$s}, 0);
        if (defined $stall && exists $client{$s} && index($buf, $stall) >= 0) {
            $stalled{$o} = 1;
            undef $stall;
            printf STDERR "stalled at %.6f\n", time;
        }
        if (defined $close && exists $client{$s} && index($buf, $close) >= 0) {
            undef $close;
            $sel->remove($o);
            close $o;
            delete @peer{$s, $o};
            delete @pending{$s, $o};
            delete $client{$s};
            syswrite($s, close_frame($close_code,
                                     "RESOURCE_ERROR - failed to deliver message (the test's relay)"));
            $s->shutdown(1);
            $closing{$s} = 1;
            printf STDERR "closed at %.6f\n", time;
            next;
        }
        if (defined $hold && exists $client{$s} && index($buf, $hold) >= 0) {
            $held{$o} = [$s, time + $hold_for];
            undef $hold;
        }
        next if $stalled{$s};
        if ($held{$s}) {
            $heldbuf{$s} .= $buf;
            next;
        }
        while ($off < $n) {
            my $w = syswrite($o, $buf, $n - $off, $off);
            if (!defined $w) { drop($s); last }
            $off += $w;
        }
    }
}
open(my $o, ">", $counts) or die "$counts: $!\n";
print $o join(" ", map { "$_ $count{$_}" } @kinds), "\n";
close $o;
