// IsolationKey: everything besides the tokens that decides whether two requests
// may share cached KV. KV computed under one key is never visible under another:
// the key goes into every block hash and the interned key id is compared on every
// hit. Empty strings are legitimate values ("no adapter", "single tenant").
//
// Why each field (see docs: prefix cache is bound to the model version, the
// tokenizer / chat template, the LoRA adapter, and the permission domain):
//   model      weights identity (file path + size/mtime or a content hash)
//   template   tokenizer and chat-template version: same text, different tokens/positions
//   adapter    LoRA or other weight delta applied on top of the model
//   tenant     permission domain; private documents must not leak across tenants
//   kv_types   the K/V element types the blocks hold ("f16/q8_0"): the same tokens
//              cached in another type are other values (the engine fills it)
//   kv_policy  the KV eviction policy ("full", "h2o B=512 S=0 R=256"): a cache
//              computed while evicting holds other values than a full one
//              (the engine fills it; evicting requests also never commit)
//
// Thread: plain value, any thread.
#pragma once

#include <cstdint>
#include <string>

namespace gb {

struct IsolationKey {
  std::string model;
  std::string template_version;
  std::string adapter;
  std::string tenant;
  std::string kv_types;
  std::string kv_policy;

  friend bool operator==(const IsolationKey&, const IsolationKey&) = default;
};

// 64-bit hash of every field (length-prefixed so field boundaries matter).
uint64_t hash_isolation_key(const IsolationKey& key);

}  // namespace gb
