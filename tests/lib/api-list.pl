#!/usr/bin/perl
# api-list.pl KIND COLUMN...: rabbitmqctl's list_queues or list_exchanges
# lines (tab-separated, no headers) made from the management API's JSON on
# stdin (GET /api/queues/VHOST or /api/exchanges/VHOST), for
# tests/lib/broker.sh ctl. Only the columns the broker answers at once,
# from its metadata: name, durable, exclusive, arguments, type. Arguments
# as rabbitmqctl prints them ([{"x-expires",40000},...]); a quorum queue's
# exclusive is empty, as rabbitmqctl leaves it. Large integers (a lease's
# token) are kept exact.
use strict;
use warnings;
use JSON::PP;

my ($kind, @columns) = @ARGV;
my $json = JSON::PP->new->allow_bignum;
my $items = $json->decode(do { local $/; <STDIN> });
die "api-list.pl: not a list\n" unless ref $items eq 'ARRAY';

sub value {
    my $v = shift;
    return '' unless defined $v;
    return $v ? 'true' : 'false' if JSON::PP::is_bool($v);
    return qq("$v") unless $v =~ /^-?[0-9]+(\.[0-9]+)?$/;
    return "$v";
}

for my $i (sort { $a->{name} cmp $b->{name} } @$items) {
    my @cells;
    for my $c (@columns) {
        if ($c eq 'arguments') {
            my $a = $i->{arguments} || {};
            push @cells, '[' . join(',', map { '{"' . $_ . '",' . value($a->{$_}) . '}' } sort keys %$a) . ']';
        } elsif ($c eq 'exclusive' && ($i->{type} // '') eq 'quorum') {
            push @cells, '';
        } elsif ($c eq 'durable' || $c eq 'exclusive') {
            push @cells, $i->{$c} ? 'true' : 'false';
        } else {
            push @cells, $i->{$c} // '';
        }
    }
    print join("\t", @cells), "\n";
}
