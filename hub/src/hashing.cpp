#include "hashing.hpp"

#include <backplane/error.hpp>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <system_error>
#include <vector>

namespace backplane::hub::detail {

Digester::Digester(std::string_view algorithm) : context_(EVP_MD_CTX_new()) {
  const EVP_MD* md = algorithm == "sha256"   ? EVP_sha256()
                     : algorithm == "sha512" ? EVP_sha512()
                                             : nullptr;
  if (md == nullptr) {
    throw InvalidArgument("digest algorithm '" + std::string(algorithm) +
                          "' is not one of sha256, sha512");
  }
  if (!context_ || EVP_DigestInit_ex(context_.get(), md, nullptr) != 1) {
    throw Error("OpenSSL cannot start a " + std::string(algorithm) + " digest");
  }
}

void Digester::update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_.get(), data, size) != 1) {
    throw Error("OpenSSL digest update failed");
  }
}

std::string Digester::finish() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest.data(), &size) != 1) {
    throw Error("OpenSSL digest final failed");
  }
  return std::string(reinterpret_cast<const char*>(digest.data()), size);
}

uint64_t stream_file(int fd, const std::string& name,
                     const std::function<void(const char*, size_t)>& chunk) {
  std::vector<char> buffer(1 << 16);
  uint64_t total = 0;
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw InvalidArgument(name + ": " +
                            std::error_code(errno, std::generic_category()).message());
    }
    if (n == 0) return total;
    chunk(buffer.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
}

std::string hex(std::string_view bytes) {
  static const char* const digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string base64(std::string_view bytes) {
  static const char* const alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(n >> shift) & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += rest == 2 ? alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace backplane::hub::detail
