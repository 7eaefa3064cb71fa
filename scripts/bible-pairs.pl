#!/usr/bin/perl
# bible-pairs.pl: English-Spanish verse pairs from two SWORD modules dumped
# by mod2imp(1) (libsword-utils): the King James Bible (engKJV2006eb) and the
# Reina-Valera 1909 (spaRV1909eb), both public domain, both in the KJV
# versification, so a verse reference names the same verse in both.
#
# usage: bible-pairs.pl KJV.imp SPARV.imp OUTDIR DEV_BOOKS TEST_BOOKS
#   DEV_BOOKS, TEST_BOOKS: comma-separated SWORD book names ("Ruth,I Peter").
# writes OUTDIR/{train,dev,test}.src (English) and .tgt (Spanish), one verse
# a line, line i of .src aligned with line i of .tgt, and OUTDIR/{train,dev,test}.ref
# (the verse of each line); every file through a temporary name, renamed once
# all of them are complete; one summary line on stderr.
#
# The recipe (../shared/data/MANIFEST.md, "Bible verse pairs"): mod2imp's
# raw OSIS records ("$$$Book C:V" then the verse markup), with notes, book
# titles, the KJV's Hebrew-letter headings of Psalm 119 and every tag
# removed; book and chapter introductions (verse 0, chapter 0) and empty
# verses dropped; pairs joined by reference. Where the Spanish chapter
# boundaries differ from the English ones, a matching reference is not a
# matching verse: the 19 chapters listed in @MISALIGNED (the 12 with an
# empty Spanish verse and the chapter after each that shifts) are dropped.
# Whole books are held out for dev and test, so no verse of theirs, and no
# verse repeated from them by accident of alignment, is trained on.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));

die "usage: bible-pairs.pl KJV.imp SPARV.imp OUTDIR DEV_BOOKS TEST_BOOKS\n" unless @ARGV == 5;
my ($kjv_file, $sparv_file, $out, $dev_books, $test_books) = @ARGV;

my @MISALIGNED = (
  'Numbers 12', 'Numbers 13', 'Numbers 29', 'Numbers 30', 'I Samuel 23', 'I Samuel 24',
  'II Samuel 20', 'II Chronicles 33', 'Job 35', 'Job 38', 'Job 39', 'Job 40', 'Job 41',
  'Hosea 11', 'Hosea 12', 'Jonah 1', 'Jonah 2', 'Acts 19', 'II Corinthians 13',
);
my %misaligned = map { $_ => 1 } @MISALIGNED;

# Verse text by reference, in the module's order.
sub read_module {
  my ($file) = @_;
  open(my $fh, '<', $file) or die "bible-pairs.pl: error: cannot read $file: $!\n";
  local $/ = undef;
  my $all = <$fh>;
  close $fh;
  my (%text, @order);
  for my $rec (split /^\$\$\$/m, $all) {
    next unless $rec =~ /\A(.+ \d+:\d+)\n(.*)\z/s;
    my ($ref, $t) = ($1, $2);
    next if $ref =~ / 0:\d+$| \d+:0$/;                      # book and chapter introductions
    $t =~ s/<note\b.*?<\/note>/ /gs;                         # footnotes and cross references
    $t =~ s/<title\b[^>]*type="(?:main|x-introduction)"[^>]*>.*?<\/title>/ /gs;
    $t =~ s/<title>\s*<foreign>.*?<\/foreign>\s*<\/title>/ /gs;  # ALEPH. BETH. ... in Psalm 119
    $t =~ s/<[^>]+>//g;
    $t =~ s/\x{00B6}/ /g;                                    # pilcrow
    $t =~ s/\s+/ /g;
    $t =~ s/^ | $//g;
    $t =~ s/ ([,.;:!?])/$1/g;
    next unless length $t;
    push @order, $ref unless exists $text{$ref};
    $text{$ref} = $t;
  }
  die "bible-pairs.pl: error: no verses in $file (is it mod2imp output?)\n" unless @order;
  return (\%text, \@order);
}

my ($en, $en_order) = read_module($kjv_file);
my ($es) = read_module($sparv_file);

my %split;
$split{$_} = 'dev' for grep { length } split /,/, $dev_books;
for (grep { length } split /,/, $test_books) {
  die "bible-pairs.pl: error: book '$_' is both in dev and in test\n" if $split{$_};
  $split{$_} = 'test';
}
my %books = map { /^(.+) \d+:\d+$/ ? ($1 => 1) : () } @$en_order;
for (sort keys %split) {
  die "bible-pairs.pl: error: no book '$_' in $kjv_file (SWORD's English names: Ruth, I Peter, "
    . "Song of Solomon, Revelation of John)\n" unless $books{$_};
}

my %fh;
for my $s (qw(train dev test)) {
  for my $ext ('src', 'tgt', 'ref') {
    open($fh{"$s.$ext"}, '>', "$out/$s.$ext.tmp") or die "bible-pairs.pl: error: cannot write $out/$s.$ext.tmp: $!\n";
  }
}
my (%count, $unpaired, $dropped) = ();
$unpaired = $dropped = 0;
for my $ref (@$en_order) {
  my ($book, $chapter) = $ref =~ /^(.+) (\d+):\d+$/;
  if (!defined $es->{$ref}) { ++$unpaired; next; }
  if ($misaligned{"$book $chapter"}) { ++$dropped; next; }
  my $s = $split{$book} // 'train';
  print { $fh{"$s.src"} } "$en->{$ref}\n";
  print { $fh{"$s.tgt"} } "$es->{$ref}\n";
  print { $fh{"$s.ref"} } "$ref\n";
  ++$count{$s};
}
for (keys %fh) { close $fh{$_} or die "bible-pairs.pl: error: cannot write $out/$_: $!\n"; }
for (keys %fh) { rename "$out/$_.tmp", "$out/$_" or die "bible-pairs.pl: error: cannot rename $out/$_.tmp: $!\n"; }
printf STDERR "bible-pairs: %d pairs: train %d, dev %d (%s), test %d (%s); %d verses without a Spanish "
  . "pair, %d in the %d misaligned chapters dropped\n", ($count{train} // 0) + ($count{dev} // 0) + ($count{test} // 0),
  $count{train} // 0, $count{dev} // 0, $dev_books, $count{test} // 0, $test_books, $unpaired, $dropped,
  scalar @MISALIGNED;
