// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the handshake that proves a
// connecting peer knows the communicator's key (bootstrap/auth.h). Small and dependency
// free: the library links no crypto library, and this is all it needs of one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace coll {

using Digest = std::array<uint8_t, 32>;

// Incremental SHA-256: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(const void* data, size_t len) { update({static_cast<const std::byte*>(data), len}); }
  Digest digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;     // bytes in buf_
  uint64_t total_ = 0;  // bytes hashed so far
};

Digest sha256(std::span<const std::byte> data);

// Incremental HMAC-SHA-256 under `key` (any length; longer than a block is hashed first).
class HmacSha256 {
 public:
  explicit HmacSha256(std::span<const std::byte> key);
  void update(std::span<const std::byte> data) { inner_.update(data); }
  void update(const void* data, size_t len) { inner_.update(data, len); }
  Digest digest();

 private:
  Sha256 inner_;
  uint8_t outerPad_[64];
};

Digest hmacSha256(std::span<const std::byte> key, std::span<const std::byte> data);

// Equality that takes the same time wherever the first difference is, so a peer cannot
// learn a correct MAC byte by byte from response times.
bool constantTimeEqual(std::span<const std::byte> a, std::span<const std::byte> b);

}  // namespace coll
