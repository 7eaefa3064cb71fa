// CRC-32 (ISO-HDLC: the polynomial of zlib's crc32, gzip and PNG), the
// checksum under every byte of checkpoints and .tfmb corpora.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfm::io {

// The CRC-32 of `n` bytes at `data`, continuing from `crc` (0 to start):
// crc32(crc32(0, a), b) is the CRC-32 of a then b, as zlib's crc32. On x86-64
// CPUs with PCLMULQDQ (checked at run time) runs of 64 bytes and more are
// folded with carry-less multiplies: about 3 GB/s on the development VM,
// 4x the slicing-by-8 tables that handle the rest (and other CPUs).
uint32_t crc32(uint32_t crc, const void* data, size_t n);

}  // namespace tfm::io
