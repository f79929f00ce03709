#include "kv/prefix_index.h"

#include <algorithm>

#include "core/check.h"

namespace gb {
namespace {

// A 64-bit finalizer with full avalanche (the splitmix64 constants, a public
// domain mixing function): every input bit affects every output bit, so chained
// hashes of similar prefixes spread evenly over the table.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t combine(uint64_t h, uint64_t v) { return mix64(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))); }

uint64_t hash_string(uint64_t h, const std::string& s) {
  h = combine(h, s.size());  // length prefix: ("ab","c") != ("a","bc")
  for (unsigned char c : s) h = combine(h, c);
  return h;
}

}  // namespace

uint64_t hash_isolation_key(const IsolationKey& key) {
  uint64_t h = 0x6b76636163686531ull;  // arbitrary nonzero seed
  h = hash_string(h, key.model);
  h = hash_string(h, key.template_version);
  h = hash_string(h, key.kv_types);
  h = hash_string(h, key.adapter);
  h = hash_string(h, key.tenant);
  if (!key.kv_policy.empty()) h = hash_string(h, key.kv_policy);  // full: the key's hash as before the field
  return h;
}

uint32_t PrefixIndex::intern(const IsolationKey& key) {
  if (const uint32_t id = find_key(key); id != 0) return id;
  keys_.push_back({key, hash_isolation_key(key)});
  return static_cast<uint32_t>(keys_.size());
}

uint32_t PrefixIndex::find_key(const IsolationKey& key) const {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i].key == key) return static_cast<uint32_t>(i + 1);
  return 0;
}

uint64_t PrefixIndex::root_hash(uint32_t isolation_id) const {
  GB_CHECK(isolation_id >= 1 && isolation_id <= keys_.size());
  return mix64(keys_[isolation_id - 1].hash) & hash_mask_;
}

uint64_t PrefixIndex::block_hash(uint64_t parent_hash, std::span<const TokenId> tokens,
                                 uint32_t isolation_id) const {
  GB_CHECK(isolation_id >= 1 && isolation_id <= keys_.size());
  uint64_t h = combine(parent_hash, keys_[isolation_id - 1].hash);
  h = combine(h, tokens.size());
  for (TokenId t : tokens) h = combine(h, static_cast<uint32_t>(t));
  return h & hash_mask_;
}

int32_t PrefixIndex::find(const std::vector<KvBlock>& blocks, uint64_t hash, PrefixSerial parent_serial,
                          std::span<const TokenId> tokens, uint32_t isolation_id) const {
  auto [first, last] = entries_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const KvBlock& b = blocks[static_cast<size_t>(it->second)];
    // The hash only nominates; the stored identity decides.
    if (b.isolation_id != isolation_id || b.parent_serial != parent_serial) continue;
    if (!std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) continue;
    return it->second;
  }
  return -1;
}

void PrefixIndex::insert(uint64_t hash, int32_t block_index) { entries_.emplace(hash, block_index); }

void PrefixIndex::erase(uint64_t hash, int32_t block_index) {
  auto [first, last] = entries_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == block_index) {
      entries_.erase(it);
      return;
    }
  }
  GB_CHECK_MSG(false, "PrefixIndex::erase: block not indexed under this hash");
}

std::vector<std::pair<uint64_t, int32_t>> PrefixIndex::entries() const {
  return {entries_.begin(), entries_.end()};
}

}  // namespace gb
