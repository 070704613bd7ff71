#!/usr/bin/perl
# proxy.pl PORTFILE TARGET_PORT: relays every TCP connection made to a port
# of its own on 127.0.0.1 (written to PORTFILE once it listens) to
# 127.0.0.1:TARGET_PORT. A single process, so that SIGSTOP makes the broker
# fall silent for every client connected through it (and SIGCONT ends that).
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;

my ($portfile, $target) = @ARGV;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 16,
                              ReuseAddr => 1) or die "listen: $!\n";
open(my $f, ">", "$portfile.tmp") or die "$portfile.tmp: $!\n";
print $f $l->sockport, "\n";
close $f;
rename "$portfile.tmp", $portfile or die "rename: $!\n";

my $sel = IO::Select->new($l);
my %peer;
sub drop {
    my $s = shift;
    my $o = delete $peer{$s};
    for my $x ($s, $o) {
        next unless $x;
        delete $peer{$x};
        $sel->remove($x);
        close $x;
    }
}
while (1) {
    for my $s ($sel->can_read) {
        if ($s == $l) {
            my $c = $l->accept or next;
            my $u = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $target);
            if (!$u) { close $c; next }
            $peer{$c} = $u;
            $peer{$u} = $c;
            $sel->add($c, $u);
            next;
        }
        next unless $peer{$s};
        my $buf;
        my $n = sysread($s, $buf, 65536);
        if (!$n) { drop($s); next }
        my ($o, $off) = ($peer{$s}, 0);
        while ($off < $n) {
            my $w = syswrite($o, $buf, $n - $off, $off);
            if (!defined $w) { drop($s); last }
            $off += $w;
        }
    }
}
