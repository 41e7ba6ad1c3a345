/*
 * Fixed-width loads and stores in a stated byte order, for any alignment.
 *
 * Kafka's wire format and its log segments are big-endian (network order):
 * record batch headers, index entries, request frames. The CRC-32C software
 * path reads little-endian 64-bit words. Each helper goes through memcpy, which
 * compilers turn into one (possibly unaligned) load or store plus a byte swap.
 *
 * The file is named kb_endian.h, not endian.h: native/ is on the include path
 * of every extension, and a file called endian.h there would shadow glibc's
 * <endian.h> for the whole build.
 */
#ifndef KB_ENDIAN_H
#define KB_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KB_BIG_ENDIAN_HOST 1
#else
#define KB_BIG_ENDIAN_HOST 0
#endif

static inline uint16_t kb_bswap16(uint16_t v) { return __builtin_bswap16(v); }
static inline uint32_t kb_bswap32(uint32_t v) { return __builtin_bswap32(v); }
static inline uint64_t kb_bswap64(uint64_t v) { return __builtin_bswap64(v); }

#if KB_BIG_ENDIAN_HOST
#define KB_TO_BE(bits, v) (v)
#define KB_TO_LE(bits, v) kb_bswap##bits(v)
#else
#define KB_TO_BE(bits, v) kb_bswap##bits(v)
#define KB_TO_LE(bits, v) (v)
#endif

#define KB_DEFINE_LOAD_STORE(bits, order, swap)                                   \
    static inline uint##bits##_t kb_load_##order##bits(const void *p)             \
    {                                                                             \
        uint##bits##_t v;                                                         \
        memcpy(&v, p, sizeof v);                                                  \
        return swap(bits, v);                                                     \
    }                                                                             \
    static inline void kb_store_##order##bits(void *p, uint##bits##_t v)          \
    {                                                                             \
        v = swap(bits, v);                                                        \
        memcpy(p, &v, sizeof v);                                                  \
    }

/* kb_load_be16/32/64, kb_store_be16/32/64: network byte order. */
KB_DEFINE_LOAD_STORE(16, be, KB_TO_BE)
KB_DEFINE_LOAD_STORE(32, be, KB_TO_BE)
KB_DEFINE_LOAD_STORE(64, be, KB_TO_BE)

/* kb_load_le16/32/64, kb_store_le16/32/64: little-endian. */
KB_DEFINE_LOAD_STORE(16, le, KB_TO_LE)
KB_DEFINE_LOAD_STORE(32, le, KB_TO_LE)
KB_DEFINE_LOAD_STORE(64, le, KB_TO_LE)

#undef KB_DEFINE_LOAD_STORE

#endif /* KB_ENDIAN_H */
