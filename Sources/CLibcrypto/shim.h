#ifndef LOCKWIPE_CLIBCRYPTO_SHIM_H
#define LOCKWIPE_CLIBCRYPTO_SHIM_H

// OpenSSL's libcrypto (Debian's libssl3), for one thing swift-crypto does not offer: an
// AES-CTR keystream written into the caller's buffer (EVP_EncryptUpdate), which the
// wipe's overwrite fills in place (Sources/LockwipeWipe/OverwriteSource.swift).
#include <openssl/evp.h>

#endif
