# Files.pm: the file writes of the test tools that other processes watch.
# spew writes a whole file at once (a reader never sees it half written);
# append adds to one, opened and closed again for each write, so that the
# processes of a tool can share it.
package Files;
use strict;
use warnings;
use Exporter 'import';
our @EXPORT_OK = qw(spew append);

# spew PATH TEXT: PATH holds TEXT, by a rename of PATH.tmp
sub spew {
    my ($path, $text) = @_;
    open(my $f, '>', "$path.tmp") or die "$path.tmp: $!\n";
    print $f $text;
    close $f or die "$path.tmp: $!\n";
    rename "$path.tmp", $path or die "rename $path: $!\n";
}

# append PATH TEXT: TEXT added at the end of PATH
sub append {
    my ($path, $text) = @_;
    open(my $f, '>>', $path) or die "$path: $!\n";
    print $f $text;
    close $f or die "$path: $!\n";
}

1;
