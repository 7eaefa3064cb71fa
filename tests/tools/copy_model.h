// Weights that make a Transformer copy its source: the output is the
// source's pieces, then eos where the source's eos is (source_eos), so a
// model of any shape ends its outputs where a trained one would end them
// roughly, at its source's length. Random weights run every sentence to its
// length limit, and forcing lengths needs a search that can (CTranslate2
// forces one length a call): a decoding benchmark at natural lengths needs
// a model that stops by itself, and no trained model of base's shape can be
// made on a 2-core CPU (tests/bench/NOTES.md). The arithmetic is a trained
// model's: every matrix is dense and full-size.
//
// How it copies (post-norm, embeddings shared with the output layer, learned
// positions: a table added as the paper's sinusoids are, the same work):
// - each position is a random code in the first d_k dimensions, and each
//   embedding a random vector in the others, both summing to zero (a layer
//   norm's mean then mixes neither into the other);
// - every sub-layer's output projection is its random initialization
//   scaled by 1e-4, so each layer passes its input through its layer norm,
//   except the first decoder layer's cross-attention;
// - there, every head's query and key read the position code, the query
//   scaled so that a decoder position's score for the source position of
//   the same number beats every other by about 30 nats (the paper's
//   sinusoids cannot: after a layer norm's mean, nearby positions are
//   alike); heads 1 .. h-1 take the token dimensions as values, d_k each,
//   and the output projection puts them back, 4 times the decoder input's
//   weight;
// - the output layer (the embeddings) then finds the copied piece: every
//   embedding shares a direction that eos's has negated, so that eos wins
//   only where it is copied.
#pragma once

#include <cstdint>

#include "libcore/model/weights.h"

namespace tfm {

// Sets `model`'s parameters (f32, on the CPU; init() drew them) so that it
// copies its source. Needs post-norm, shared and tied embeddings scaled by
// sqrt(d_model), learned positions, sources ending in eos (source_eos), no
// output bias, d_k = d_v and heads x d_k = d_model with at least 2 heads.
void make_copy_model(ModelWeights& model, uint64_t seed);

}  // namespace tfm
