#!/usr/bin/perl
# ptb-split.pl: the Penn Treebank WSJ sample (NLTK's treebank.zip,
# ../shared/data/MANIFEST.md section 6: 3,914 trees in wsj_0001 ... wsj_0199)
# split into train, dev and test by file, so that no sentence of a dev or
# test file is trained on.
#
# usage: ptb-split.pl ZIP OUTDIR DEV TEST
#   DEV, TEST: the files held out, as ranges of file numbers
#   ("0160-0179", "0180-0199"; several joined by commas); every other file
#   of treebank/combined/ is training data.
# writes OUTDIR/{train,dev,test}.mrg, the files' bracketed trees as they are
# (tfm-tree clean does the rest), in file order, each through a temporary
# name renamed once all three are complete; one summary line on stderr.
# The zip is read with IO::Uncompress::Unzip (core Perl): no unzip needed.
use strict;
use warnings;
use IO::Uncompress::Unzip qw($UnzipError);

die "usage: ptb-split.pl ZIP OUTDIR DEV TEST\n" unless @ARGV == 4;
my ($zip, $out, $dev, $test) = @ARGV;
sub error { die "ptb-split.pl: error: @_\n"; }

# "0160-0179,0185" -> { 160 => 1, ..., 179 => 1, 185 => 1 }
sub files {
  my ($what, $spec) = @_;
  my %set;
  for my $range (split /,/, $spec) {
    $range =~ /^\s*(?:wsj_)?(\d+)\s*(?:-\s*(?:wsj_)?(\d+))?\s*$/
      or error("$what: '$range' is not a range of file numbers (like 0180-0199)");
    my ($from, $to) = ($1, $2 // $1);
    error("$what: the range $range runs backwards") if $to < $from;
    $set{$_} = 1 for $from .. $to;
  }
  error("$what: no files") unless %set;
  return \%set;
}
my %held = (dev => files('DEV', $dev), test => files('TEST', $test));
for (keys %{ $held{dev} }) {
  error(sprintf "wsj_%04d is both in DEV and in TEST", $_) if $held{test}{$_};
}

# Each wsj_NNNN.mrg of treebank/combined/, by number.
my $u = IO::Uncompress::Unzip->new($zip) or error("cannot read $zip: $UnzipError");
my %text;
for (my $status = 1; $status > 0; $status = $u->nextStream) {
  my $name = $u->getHeaderInfo->{Name};
  my $data = '';
  my $n;
  while (($n = $u->read(my $buf)) > 0) { $data .= $buf; }
  error("cannot read $name in $zip: $UnzipError") if $n < 0;
  $text{$1} = $data if $name =~ m{^treebank/combined/wsj_(\d{4})\.mrg$};
}
error("no treebank/combined/wsj_*.mrg in $zip (is it NLTK's treebank.zip?)") unless %text;
for my $split (qw(dev test)) {
  for (sort { $a <=> $b } keys %{ $held{$split} }) {
    error(sprintf "%s: no file wsj_%04d in %s", uc $split, $_, $zip) unless exists $text{ sprintf "%04d", $_ };
  }
}

# Trees counted by their top-level brackets.
sub trees {
  my ($depth, $n) = (0, 0);
  for (split //, $_[0] =~ tr/()//cdr) {
    $depth += $_ eq '(' ? 1 : -1;
    ++$n if $depth == 0;
  }
  return $n;
}
my %fh;
my %count = map { $_ => { files => 0, trees => 0 } } qw(train dev test);
for my $split (qw(train dev test)) {
  open($fh{$split}, '>', "$out/$split.mrg.tmp") or error("cannot write $out/$split.mrg.tmp: $!");
}
for my $file (sort keys %text) {
  my $split = $held{dev}{ $file + 0 } ? 'dev' : $held{test}{ $file + 0 } ? 'test' : 'train';
  print { $fh{$split} } $text{$file};
  $count{$split}{files}++;
  $count{$split}{trees} += trees($text{$file});
}
for (keys %fh) { close $fh{$_} or error("cannot write $out/$_.mrg: $!"); }
for (keys %fh) { rename "$out/$_.mrg.tmp", "$out/$_.mrg" or error("cannot rename $out/$_.mrg.tmp: $!"); }
printf STDERR "ptb-split: %d files, %d trees: train %d (%d files), dev %d (wsj_%s), test %d (wsj_%s)\n",
  scalar(keys %text), $count{train}{trees} + $count{dev}{trees} + $count{test}{trees}, $count{train}{trees},
  $count{train}{files}, $count{dev}{trees}, $dev, $count{test}{trees}, $test;
