// Message digests for the hub (OpenSSL EVP): the lock file's SHA-256 and the kernel-builder
// digests (SHA-256 or SHA-512, base64). Internal to libbackplane-hub.
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace backplane::hub::detail {

class Digester {
 public:
  // "sha256" or "sha512"; anything else throws InvalidArgument.
  explicit Digester(std::string_view algorithm = "sha256");
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  std::string finish();  // the raw digest bytes; call once

 private:
  struct ContextDeleter {
    void operator()(EVP_MD_CTX* context) const { EVP_MD_CTX_free(context); }
  };
  std::unique_ptr<EVP_MD_CTX, ContextDeleter> context_;
};

// Reads `fd` (an open file, left open) to its end, giving each chunk to `chunk`; returns the
// bytes read. A read error throws InvalidArgument naming `name`.
uint64_t stream_file(int fd, const std::string& name,
                     const std::function<void(const char*, size_t)>& chunk);

std::string hex(std::string_view bytes);     // lowercase
std::string base64(std::string_view bytes);  // RFC 4648, with padding

}  // namespace backplane::hub::detail
