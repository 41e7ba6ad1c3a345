/*
 * CRC-32C (Castagnoli): software, SSE4.2, AVX2, AVX-512 and ARMv8 paths, chosen at load.
 *
 * The CRC. Polynomial P = 0x1EDC6F41, processed bit-reflected (0x82F63B78):
 * each byte enters least significant bit first and bit 0 of the 32-bit
 * register holds the coefficient of x^31. Read the message M as a polynomial
 * whose first byte carries the highest powers. A register r that consumes M
 * becomes  r * x^|M| + M * x^32  (mod P), |M| in bits. The public functions
 * invert the register on entry and on exit, so CRCs chain: feed the CRC of a
 * prefix back in and the result is the CRC of the whole.
 *
 * 1. Software (slicing-by-8). table[k][b] is the register after byte b
 *    followed by k zero bytes, starting from zero. Eight bytes are consumed
 *    with eight independent lookups: xor the register into the low four bytes
 *    of the word, then xor table[7 - i][byte i] over i. Portable; about
 *    1-2 GB/s.
 *
 * 2. SSE4.2 (x86-64). The crc32 instruction consumes 8 bytes:
 *    r' = r * x^64 + d * x^32 (mod P). Its latency is 3 cycles but the CPU
 *    starts one per cycle, so a block of 3L bytes is split into three
 *    stretches of L bytes run as three independent registers r0, r1, r2
 *    (r1 and r2 start at zero), and the three results are joined:
 *        r = shift(r0, 2L) ^ shift(r1, L) ^ r2,  shift(r, L) = r * x^(8L) mod P
 *    shift is one carry-less multiply (PCLMULQDQ) of r by the constant
 *    x^(8L-33) mod P, giving a 64-bit product, then one crc32 of that product
 *    into a zero register, which multiplies by x^32 and reduces. (The product
 *    of two reflected numbers carries one extra factor x, hence 33.) The
 *    constants for every L that is a multiple of 8 up to 3 * STREAM_MAX are
 *    tabled at load, so L follows the buffer: n / 3 rounded down to 8 bytes,
 *    at most STREAM_MAX. Short buffers and tails use one stream.
 *    From about 0.5 KiB the crc32 unit gets help: a hybrid block of 136k bytes
 *    folds its first 64k bytes with PCLMULQDQ into four 128-bit lanes (as in
 *    path 3, one lane per xmm register) while the three streams take the next
 *    3 * 24k bytes in the same loop; PCLMULQDQ and crc32 use different
 *    execution ports, so both run at full rate. The lanes reduce to a
 *    register that is shifted by 3 * 24k bytes and joined like a fourth stream.
 *
 * 3. AVX-512 VPCLMULQDQ (x86-64, large buffers). Four 512-bit accumulators
 *    hold 256 bytes; each 128-bit lane X = A * x^64 + B (A its first 8 bytes)
 *    is carried D bits forward and xored into the data D bits later:
 *        X * x^D = A * x^(64+D) + B * x^D,
 *    two carry-less multiplies per lane by x^(D+31) and x^(D-33) mod P (the
 *    extra 33 again from reflection: a 64 x 32-bit product lands in a 128-bit
 *    lane times x^33). The incoming register is xored into the first four
 *    bytes. At the end the accumulators are folded into one, its four lanes
 *    into one 128-bit lane X, and the register is X * x^32 mod P, which is two
 *    crc32 instructions: crc32(crc32(0, A), B). Remaining bytes go to path 2.
 *
 * 3b. AVX2 VPCLMULQDQ (x86-64 CPUs with VPCLMULQDQ but not AVX-512, such
 *    as AMD Zen 3). Path 3 on 256-bit registers: eight accumulators of two
 *    lanes hold 256 bytes, folded by the same constants; without AVX-512's
 *    three-way xor each fold takes two xors. The accumulators are folded
 *    pairwise into one, its first lane onto its second, then two crc32.
 *    Folding 256-bit registers alone only matches path 2 (the carry-less
 *    multiplier is the limit), so, as in path 2's hybrid, three crc32
 *    streams run in the same loop: a block folds 256 k bytes while the
 *    streams take the next 3 * 96 k, and the folded register is shifted
 *    past the streams and joined like a fourth stream.
 *
 * 4. ARMv8 (aarch64 Linux with the CRC32 and PMULL extensions). Path 2
 *    without the hybrid: crc32cx in three streams joined by PMULL shifts.
 *
 * The fold constants are computed at load from x^n mod P; nothing is copied
 * from a table in a book. Other CPUs, and builds with KB_CRC32C_PORTABLE
 * defined, get path 1 alone.
 */
#include "crc32c.h"

#include "kb_endian.h"

#include <string.h>

#ifdef KBROKER_DEBUG /* not assert(): Python's CFLAGS define NDEBUG */
#include <stdio.h>
#include <stdlib.h>
#define KB_ASSERT(cond)                                                                \
    ((cond) ? (void)0                                                                  \
            : (fprintf(stderr, "%s:%d: KB_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond), \
               abort()))
#else
#define KB_ASSERT(cond) ((void)0)
#endif

#if defined(__x86_64__) && !defined(KB_CRC32C_PORTABLE)
#define KB_X86_HW 1
#include <immintrin.h>
#else
#define KB_X86_HW 0
#endif

#if defined(__aarch64__) && defined(__linux__) && !defined(KB_CRC32C_PORTABLE)
#define KB_ARM_HW 1
#include <arm_acle.h>
#include <arm_neon.h>
#include <sys/auxv.h>
#else
#define KB_ARM_HW 0
#endif

#define POLY_REFLECTED 0x82f63b78u
#define GF_ONE 0x80000000u /* x^0 in the reflected representation */

typedef uint32_t (*crc_fn)(uint32_t crc, const void *data, size_t length);

/* ---- arithmetic in GF(2)[x] / P, reflected, used to build tables ---- */

/* Bytes to skip from p to reach a multiple of alignment, at most n. */
static size_t head_length(const unsigned char *p, size_t n, size_t alignment)
{
    size_t head = (size_t)(-(uintptr_t)p & (alignment - 1));
    return head < n ? head : n;
}

static uint32_t gf_times_x(uint32_t a)
{
    return (a & 1) ? (a >> 1) ^ POLY_REFLECTED : a >> 1;
}

#if KB_X86_HW || KB_ARM_HW /* products and powers build the hardware paths' constants */

static uint32_t gf_mul(uint32_t a, uint32_t b)
{
    uint32_t product = 0;
    for (int degree = 0; degree < 32; degree++) {
        if (a & (GF_ONE >> degree))
            product ^= b;
        b = gf_times_x(b);
    }
    return product;
}

/* x^n mod P by square and multiply. */
static uint32_t gf_xpow(uint64_t n)
{
    uint32_t result = GF_ONE, square = GF_ONE >> 1;
    for (; n; n >>= 1) {
        if (n & 1)
            result = gf_mul(result, square);
        square = gf_mul(square, square);
    }
    return result;
}

#endif

/* ---- 1. software: slicing-by-8 ---- */

static uint32_t sw_table[8][256];

static void sw_build_tables(void)
{
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t r = byte;
        for (int bit = 0; bit < 8; bit++)
            r = gf_times_x(r);
        sw_table[0][byte] = r;
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t r = sw_table[0][byte];
        for (int k = 1; k < 8; k++) {
            r = sw_table[0][r & 0xff] ^ (r >> 8);
            sw_table[k][byte] = r;
        }
    }
}

static uint32_t sw_bytes(uint32_t r, const unsigned char *p, size_t n)
{
    while (n--)
        r = sw_table[0][(r ^ *p++) & 0xff] ^ (r >> 8);
    return r;
}

static uint32_t sw_word(uint32_t r, uint64_t word)
{
    word ^= r;
    return sw_table[7][word & 0xff] ^ sw_table[6][(word >> 8) & 0xff] ^
           sw_table[5][(word >> 16) & 0xff] ^ sw_table[4][(word >> 24) & 0xff] ^
           sw_table[3][(word >> 32) & 0xff] ^ sw_table[2][(word >> 40) & 0xff] ^
           sw_table[1][(word >> 48) & 0xff] ^ sw_table[0][word >> 56];
}

static uint32_t sw_update(uint32_t r, const unsigned char *p, size_t n)
{
    size_t head = head_length(p, n, 8);
    r = sw_bytes(r, p, head);
    p += head;
    n -= head;
    for (; n >= 8; p += 8, n -= 8)
        r = sw_word(r, kb_load_le64(p));
    return sw_bytes(r, p, n);
}

uint32_t kb_crc32c_sw(uint32_t crc, const void *data, size_t length)
{
    return ~sw_update(~crc, data, length);
}

/* ---- the instructions under paths 2 and 4, one set per architecture ---- */

#if KB_X86_HW
#define KB_HW_TARGET __attribute__((target("sse4.2,pclmul")))
#define KB_SSE42 KB_HW_TARGET

/* The 8-byte step keeps its register in 64 bits: no zero-extension in the chain. */
KB_HW_TARGET static inline uint64_t hw_crc64(uint64_t r, uint64_t v) { return _mm_crc32_u64(r, v); }
KB_HW_TARGET static inline uint32_t hw_crc32(uint32_t r, uint32_t v) { return _mm_crc32_u32(r, v); }
KB_HW_TARGET static inline uint32_t hw_crc16(uint32_t r, uint16_t v) { return _mm_crc32_u16(r, v); }
KB_HW_TARGET static inline uint32_t hw_crc8(uint32_t r, uint8_t v) { return _mm_crc32_u8(r, v); }

/* r * x^(8L): carry-less multiply by shift_by[L / 8], then reduce. */
KB_HW_TARGET static uint32_t hw_shift(uint32_t r, uint32_t constant)
{
    __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)r),
                                           _mm_cvtsi32_si128((int)constant), 0x00);
    return (uint32_t)hw_crc64(0, (uint64_t)_mm_cvtsi128_si64(product));
}
#elif KB_ARM_HW
#define KB_HW_TARGET __attribute__((target("+crc+crypto")))

KB_HW_TARGET static inline uint64_t hw_crc64(uint64_t r, uint64_t v)
{
    return __crc32cd((uint32_t)r, v);
}
KB_HW_TARGET static inline uint32_t hw_crc32(uint32_t r, uint32_t v) { return __crc32cw(r, v); }
KB_HW_TARGET static inline uint32_t hw_crc16(uint32_t r, uint16_t v) { return __crc32ch(r, v); }
KB_HW_TARGET static inline uint32_t hw_crc8(uint32_t r, uint8_t v) { return __crc32cb(r, v); }

/* r * x^(8L): carry-less multiply by shift_by[L / 8], then reduce. */
KB_HW_TARGET static uint32_t hw_shift(uint32_t r, uint32_t constant)
{
    poly128_t product = vmull_p64((poly64_t)r, (poly64_t)constant);
    return (uint32_t)hw_crc64(0, vgetq_lane_u64(vreinterpretq_u64_p128(product), 0));
}
#endif

#if KB_X86_HW || KB_ARM_HW

/* ---- 2. three crc32 streams (x86-64 SSE4.2 and ARMv8 alike) ---- */

#define STREAM_MAX 4096 /* bytes per stream in one block */
#define STREAM_MIN 64   /* below 3 * STREAM_MIN bytes, one stream */

/* shift_by[i] = x^(64 i - 33) mod P: multiplies a register by x^(8 * 8i). */
static uint32_t shift_by[3 * STREAM_MAX / 8 + 1];

static void shift_build_table(void)
{
    uint32_t x64 = gf_xpow(64);
    shift_by[1] = gf_xpow(64 - 33);
    for (size_t i = 2; i < sizeof shift_by / sizeof shift_by[0]; i++)
        shift_by[i] = gf_mul(shift_by[i - 1], x64);
}

/* Streams r0, r1, r2 (len bytes apart) each take the 8 bytes at p. */
#define STREAMS_STEP(p, len)                                                      \
    do {                                                                          \
        r0 = hw_crc64(r0, kb_load_le64(p));                                       \
        r1 = hw_crc64(r1, kb_load_le64((p) + (len)));                             \
        r2 = hw_crc64(r2, kb_load_le64((p) + 2 * (len)));                         \
    } while (0)

KB_HW_TARGET static uint32_t hw_one_stream(uint32_t r, const unsigned char *p, size_t n)
{
    uint64_t r64 = r;
    for (; n >= 8; p += 8, n -= 8)
        r64 = hw_crc64(r64, kb_load_le64(p));
    r = (uint32_t)r64;
    if (n & 4) {
        r = hw_crc32(r, kb_load_le32(p));
        p += 4;
    }
    if (n & 2) {
        r = hw_crc16(r, kb_load_le16(p));
        p += 2;
    }
    if (n & 1)
        r = hw_crc8(r, *p);
    return r;
}

/* One block of 3 * len bytes; len is a multiple of 8, at most STREAM_MAX. */
KB_HW_TARGET static uint32_t hw_three_streams(uint32_t r, const unsigned char *p, size_t len)
{
    KB_ASSERT(len % 8 == 0 && len <= STREAM_MAX);
    uint64_t r0 = r, r1 = 0, r2 = 0;
    const unsigned char *end = p + len;
    for (; p < end; p += 8)
        STREAMS_STEP(p, len);
    return hw_shift((uint32_t)r0, shift_by[2 * len / 8]) ^
           hw_shift((uint32_t)r1, shift_by[len / 8]) ^ (uint32_t)r2;
}

/* Aligned three-stream blocks while they pay, then one stream. */
KB_HW_TARGET static uint32_t hw_update(uint32_t r, const unsigned char *p, size_t n)
{
    size_t head = head_length(p, n, 8);
    r = hw_one_stream(r, p, head);
    p += head;
    n -= head;
    while (n >= 3 * STREAM_MIN) {
        size_t len = n / 24 * 8;
        if (len > STREAM_MAX)
            len = STREAM_MAX;
        r = hw_three_streams(r, p, len);
        p += 3 * len;
        n -= 3 * len;
    }
    return hw_one_stream(r, p, n);
}

#endif

#if KB_X86_HW

/* ---- 2b. SSE4.2 helped by PCLMULQDQ folding; its constants ---- */

/* Per 128-bit lane {x^(D+31), x^(D-33)} mod P: carries a lane D bits on. */
static uint64_t fold_by_256_bytes[8]; /* D = 2048 in every lane */
static uint64_t fold_by_64_bytes[8];  /* D = 512 */
static uint64_t fold_by_128_bytes[8]; /* D = 1024 */
static uint64_t fold_by_192_bytes[8]; /* D = 1536 */
static uint64_t fold_lanes[8];        /* lanes 0..2 by D = 384, 256, 128; lane 3 zero */
static uint64_t fold_by_32_bytes[4];  /* D = 256, two lanes (the AVX2 path's 256-bit folds) */

static void fold_constant(uint64_t *lane, uint64_t d_bits)
{
    lane[0] = gf_xpow(d_bits + 31);
    lane[1] = gf_xpow(d_bits - 33);
}

static void fold_build_tables(void)
{
    for (int lane = 0; lane < 4; lane++) {
        fold_constant(&fold_by_256_bytes[2 * lane], 2048);
        fold_constant(&fold_by_64_bytes[2 * lane], 512);
        fold_constant(&fold_by_128_bytes[2 * lane], 1024);
        fold_constant(&fold_by_192_bytes[2 * lane], 1536);
    }
    for (int lane = 0; lane < 2; lane++)
        fold_constant(&fold_by_32_bytes[2 * lane], 256);
    for (int lane = 0; lane < 3; lane++)
        fold_constant(&fold_lanes[2 * lane], 128u * (3u - (unsigned)lane));
}

#define HYBRID_MAX 128 /* iterations in one hybrid block */
#define HYBRID_MIN 4   /* fewer iterations than this: plain three streams */
_Static_assert(3 * 24 * HYBRID_MAX <= 3 * STREAM_MAX, "hybrid shifts beyond shift_by");

/* acc * x^D + data for one 128-bit lane, D fixed by the constants. */
KB_SSE42 static inline __m128i sse42_fold(__m128i acc, const uint64_t *constants, __m128i data)
{
    __m128i k = _mm_loadu_si128((const __m128i *)constants);
    __m128i low = _mm_clmulepi64_si128(acc, k, 0x00);
    __m128i high = _mm_clmulepi64_si128(acc, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(low, high), data);
}

/* The register for 64 bytes held as four 128-bit lanes, first to last. */
KB_SSE42 static uint32_t sse42_reduce(__m128i x0, __m128i x1, __m128i x2, __m128i x3)
{
    __m128i lane = sse42_fold(x2, &fold_lanes[4], x3);
    lane = sse42_fold(x1, &fold_lanes[2], lane);
    lane = sse42_fold(x0, &fold_lanes[0], lane);
    uint64_t r = hw_crc64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)hw_crc64(r, (uint64_t)_mm_extract_epi64(lane, 1));
}

KB_SSE42 static inline __m128i sse42_load(const unsigned char *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

/*
 * One hybrid block of 136 k bytes: 64 k bytes folded by PCLMULQDQ into four
 * 128-bit lanes while three crc32 streams take the next 3 * 24 k bytes, in
 * the same loop (the two instructions run on different execution ports).
 */
KB_SSE42 static uint32_t sse42_hybrid_block(uint32_t r, const unsigned char *p, size_t k)
{
    KB_ASSERT(k >= 1 && k <= HYBRID_MAX);
    const unsigned char *s = p + 64 * k;
    const size_t len = 24 * k;
    uint64_t r0 = 0, r1 = 0, r2 = 0;
    __m128i x0 = _mm_xor_si128(sse42_load(p), _mm_cvtsi32_si128((int)r));
    __m128i x1 = sse42_load(p + 16), x2 = sse42_load(p + 32), x3 = sse42_load(p + 48);
    for (size_t i = 1; i < k; i++, s += 24) {
        p += 64;
        x0 = sse42_fold(x0, fold_by_64_bytes, sse42_load(p));
        STREAMS_STEP(s, len);
        x1 = sse42_fold(x1, fold_by_64_bytes, sse42_load(p + 16));
        STREAMS_STEP(s + 8, len);
        x2 = sse42_fold(x2, fold_by_64_bytes, sse42_load(p + 32));
        STREAMS_STEP(s + 16, len);
        x3 = sse42_fold(x3, fold_by_64_bytes, sse42_load(p + 48));
    }
    STREAMS_STEP(s, len);
    STREAMS_STEP(s + 8, len);
    STREAMS_STEP(s + 16, len);
    return hw_shift(sse42_reduce(x0, x1, x2, x3), shift_by[3 * len / 8]) ^
           hw_shift((uint32_t)r0, shift_by[2 * len / 8]) ^
           hw_shift((uint32_t)r1, shift_by[len / 8]) ^ (uint32_t)r2;
}

/* Hybrid blocks while they pay, then path 2. */
KB_SSE42 static uint32_t sse42_update(uint32_t r, const unsigned char *p, size_t n)
{
    while (n >= 136 * HYBRID_MIN) {
        size_t k = n / 136;
        if (k > HYBRID_MAX)
            k = HYBRID_MAX;
        r = sse42_hybrid_block(r, p, k);
        p += 136 * k;
        n -= 136 * k;
    }
    return hw_update(r, p, n);
}

KB_SSE42 uint32_t kb_crc32c_sse42(uint32_t crc, const void *data, size_t length)
{
    return ~sse42_update(~crc, data, length);
}

/* ---- 3. AVX-512 VPCLMULQDQ folding ---- */

#define KB_AVX512 __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))
#define FOLD_MIN 512 /* smaller buffers go to the SSE4.2 path */
/* After at most 63 bytes to align and 63 left over, at least 256 remain to fold. */
_Static_assert(FOLD_MIN >= 256 + 2 * 63, "FOLD_MIN too small for avx512_fold_all");

/* acc * x^D + data, D fixed by the constants. */
KB_AVX512 static inline __m512i avx512_fold(__m512i acc, __m512i constants, __m512i data)
{
    __m512i low = _mm512_clmulepi64_epi128(acc, constants, 0x00);
    __m512i high = _mm512_clmulepi64_epi128(acc, constants, 0x11);
    return _mm512_ternarylogic_epi64(low, high, data, 0x96);
}

KB_AVX512 static inline __m512i avx512_constants(const uint64_t *table)
{
    return _mm512_loadu_si512(table);
}

/* The register for a 512-bit accumulator: four lanes into one, then crc32. */
KB_AVX512 static uint32_t avx512_reduce(__m512i acc)
{
    __m512i carried = avx512_fold(acc, avx512_constants(fold_lanes), _mm512_setzero_si512());
    __m128i lane = _mm_xor_si128(_mm512_castsi512_si128(carried),
                                 _mm512_extracti32x4_epi32(carried, 1));
    lane = _mm_xor_si128(lane, _mm512_extracti32x4_epi32(carried, 2));
    lane = _mm_xor_si128(lane, _mm512_extracti32x4_epi32(acc, 3));
    uint64_t r = hw_crc64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)hw_crc64(r, (uint64_t)_mm_extract_epi64(lane, 1));
}

/* Consumes n bytes, n >= 256 and a multiple of 64. */
KB_AVX512 static uint32_t avx512_fold_all(uint32_t r, const unsigned char *p, size_t n)
{
    KB_ASSERT(n >= 256 && n % 64 == 0);
    __m512i k256 = avx512_constants(fold_by_256_bytes);
    __m512i k64 = avx512_constants(fold_by_64_bytes);
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p),
                                  _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)r)));
    __m512i x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
        x0 = avx512_fold(x0, k256, _mm512_loadu_si512(p));
        x1 = avx512_fold(x1, k256, _mm512_loadu_si512(p + 64));
        x2 = avx512_fold(x2, k256, _mm512_loadu_si512(p + 128));
        x3 = avx512_fold(x3, k256, _mm512_loadu_si512(p + 192));
    }
    x3 = avx512_fold(x2, k64, x3);
    x3 = avx512_fold(x1, avx512_constants(fold_by_128_bytes), x3);
    x3 = avx512_fold(x0, avx512_constants(fold_by_192_bytes), x3);
    for (; n >= 64; p += 64, n -= 64)
        x3 = avx512_fold(x3, k64, _mm512_loadu_si512(p));
    return avx512_reduce(x3);
}

KB_AVX512 static uint32_t avx512_update(uint32_t r, const unsigned char *p, size_t n)
{
    if (n >= FOLD_MIN) {
        size_t head = head_length(p, n, 64);
        r = hw_one_stream(r, p, head);
        p += head;
        n -= head;
        size_t body = n & ~(size_t)63;
        r = avx512_fold_all(r, p, body);
        _mm256_zeroupper(); /* dirty upper halves slow the caller's SSE code */
        p += body;
        n -= body;
    }
    return sse42_update(r, p, n);
}

KB_AVX512 uint32_t kb_crc32c_avx512(uint32_t crc, const void *data, size_t length)
{
    return ~avx512_update(~crc, data, length);
}

/* ---- 3b. AVX2 VPCLMULQDQ folding (256-bit registers, no AVX-512) ---- */

#define KB_AVX2 __attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
#define AVX2_FOLD_MIN 512 /* smaller buffers go to the SSE4.2 path */
/* After at most 31 bytes to align and 31 left over, at least 256 remain to fold. */
_Static_assert(AVX2_FOLD_MIN >= 256 + 2 * 31, "AVX2_FOLD_MIN too small for avx2_fold_all");

/* acc * x^D + data for both 128-bit lanes, D fixed by the constants. */
KB_AVX2 static inline __m256i avx2_fold(__m256i acc, __m256i constants, __m256i data)
{
    __m256i low = _mm256_clmulepi64_epi128(acc, constants, 0x00);
    __m256i high = _mm256_clmulepi64_epi128(acc, constants, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(low, high), data);
}

/* Both lanes of a constant table (every table repeats its lane). */
KB_AVX2 static inline __m256i avx2_constants(const uint64_t *table)
{
    return _mm256_loadu_si256((const __m256i *)table);
}

KB_AVX2 static inline __m256i avx2_load(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The register for a 256-bit accumulator: its first lane carried 128 bits
 * onto the second, then crc32 of that lane. */
KB_AVX2 static uint32_t avx2_reduce(__m256i acc)
{
    __m128i lane = _mm_xor_si128(
        _mm_xor_si128(_mm_clmulepi64_si128(_mm256_castsi256_si128(acc),
                                           _mm_loadu_si128((const __m128i *)&fold_lanes[4]), 0x00),
                      _mm_clmulepi64_si128(_mm256_castsi256_si128(acc),
                                           _mm_loadu_si128((const __m128i *)&fold_lanes[4]), 0x11)),
        _mm256_extracti128_si256(acc, 1));
    uint64_t r = hw_crc64(0, (uint64_t)_mm_cvtsi128_si64(lane));
    return (uint32_t)hw_crc64(r, (uint64_t)_mm_extract_epi64(lane, 1));
}

/* Eight accumulators, first to last, joined into the last: pairs, pairs of
 * pairs, then the two halves. */
KB_AVX2 static inline __m256i avx2_join(__m256i x0, __m256i x1, __m256i x2, __m256i x3,
                                        __m256i x4, __m256i x5, __m256i x6, __m256i x7)
{
    __m256i k32 = avx2_constants(fold_by_32_bytes), k64 = avx2_constants(fold_by_64_bytes);
    x1 = avx2_fold(x0, k32, x1);
    x3 = avx2_fold(x2, k32, x3);
    x5 = avx2_fold(x4, k32, x5);
    x7 = avx2_fold(x6, k32, x7);
    x3 = avx2_fold(x1, k64, x3);
    x7 = avx2_fold(x5, k64, x7);
    return avx2_fold(x3, avx2_constants(fold_by_128_bytes), x7);
}

/* Consumes n bytes, n >= 256 and a multiple of 32. Eight named accumulators,
 * not an array: at -O2 GCC keeps an array in memory. */
KB_AVX2 static uint32_t avx2_fold_all(uint32_t r, const unsigned char *p, size_t n)
{
    KB_ASSERT(n >= 256 && n % 32 == 0);
    __m256i k256 = avx2_constants(fold_by_256_bytes);
    __m256i k32 = avx2_constants(fold_by_32_bytes);
    __m256i x0 = _mm256_xor_si256(avx2_load(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)r)));
    __m256i x1 = avx2_load(p + 32), x2 = avx2_load(p + 64), x3 = avx2_load(p + 96);
    __m256i x4 = avx2_load(p + 128), x5 = avx2_load(p + 160), x6 = avx2_load(p + 192);
    __m256i x7 = avx2_load(p + 224);
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
        x0 = avx2_fold(x0, k256, avx2_load(p));
        x1 = avx2_fold(x1, k256, avx2_load(p + 32));
        x2 = avx2_fold(x2, k256, avx2_load(p + 64));
        x3 = avx2_fold(x3, k256, avx2_load(p + 96));
        x4 = avx2_fold(x4, k256, avx2_load(p + 128));
        x5 = avx2_fold(x5, k256, avx2_load(p + 160));
        x6 = avx2_fold(x6, k256, avx2_load(p + 192));
        x7 = avx2_fold(x7, k256, avx2_load(p + 224));
    }
    x7 = avx2_join(x0, x1, x2, x3, x4, x5, x6, x7);
    for (; n >= 32; p += 32, n -= 32)
        x7 = avx2_fold(x7, k32, avx2_load(p));
    return avx2_reduce(x7);
}

/* Bytes per crc32 stream for every 256 bytes folded: 96 ran fastest of
 * 32..128 on Zen 4 with this path forced (46 GB/s at 1 MiB, where folding
 * alone gave 29 and the SSE4.2 path 31: vpclmulqdq and crc32 use different
 * execution units, so the hybrid adds their rates). */
#define AVX2_STREAM_STEP 96
#define AVX2_HYBRID_STEP (256 + 3 * AVX2_STREAM_STEP) /* bytes per iteration */
#define AVX2_HYBRID_MAX (STREAM_MAX / AVX2_STREAM_STEP) /* iterations per block */
_Static_assert(AVX2_STREAM_STEP % 32 == 0, "streams take 8 bytes a step, a quarter per fold pair");

/*
 * One hybrid block of k iterations: 256 k bytes folded into eight 256-bit
 * accumulators while three crc32 streams take the next 3 * len bytes
 * (len = AVX2_STREAM_STEP * k) in the same loop, as in sse42_hybrid_block.
 */
KB_AVX2 static uint32_t avx2_hybrid_block(uint32_t r, const unsigned char *p, size_t k)
{
    KB_ASSERT(k >= 1 && k <= AVX2_HYBRID_MAX);
    const unsigned char *s = p + 256 * k;
    const size_t len = AVX2_STREAM_STEP * k;
    uint64_t r0 = 0, r1 = 0, r2 = 0;
    __m256i k256 = avx2_constants(fold_by_256_bytes);
    __m256i x0 = _mm256_xor_si256(avx2_load(p), _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)r)));
    __m256i x1 = avx2_load(p + 32), x2 = avx2_load(p + 64), x3 = avx2_load(p + 96);
    __m256i x4 = avx2_load(p + 128), x5 = avx2_load(p + 160), x6 = avx2_load(p + 192);
    __m256i x7 = avx2_load(p + 224);
    /* Three stream pointers, so each step addresses by a constant offset. */
    const unsigned char *q0 = s, *q1 = s + len, *q2 = s + 2 * len;
#define AVX2_STREAMS_STEP(offset)                                                 \
    do {                                                                          \
        r0 = hw_crc64(r0, kb_load_le64(q0 + (offset)));                           \
        r1 = hw_crc64(r1, kb_load_le64(q1 + (offset)));                           \
        r2 = hw_crc64(r2, kb_load_le64(q2 + (offset)));                           \
    } while (0)
    /* A quarter of an iteration's stream steps, between two pairs of folds. */
#define AVX2_STREAMS_QUARTER(quarter)                                             \
    do {                                                                          \
        const size_t from = (quarter) * (AVX2_STREAM_STEP / 4);                   \
        _Pragma("GCC unroll 16")                                                  \
        for (size_t j = from; j < from + AVX2_STREAM_STEP / 4; j += 8)            \
            AVX2_STREAMS_STEP(j);                                                 \
    } while (0)
    for (size_t i = 1; i < k; i++) {
        p += 256;
        x0 = avx2_fold(x0, k256, avx2_load(p));
        x1 = avx2_fold(x1, k256, avx2_load(p + 32));
        AVX2_STREAMS_QUARTER(0);
        x2 = avx2_fold(x2, k256, avx2_load(p + 64));
        x3 = avx2_fold(x3, k256, avx2_load(p + 96));
        AVX2_STREAMS_QUARTER(1);
        x4 = avx2_fold(x4, k256, avx2_load(p + 128));
        x5 = avx2_fold(x5, k256, avx2_load(p + 160));
        AVX2_STREAMS_QUARTER(2);
        x6 = avx2_fold(x6, k256, avx2_load(p + 192));
        x7 = avx2_fold(x7, k256, avx2_load(p + 224));
        AVX2_STREAMS_QUARTER(3);
        q0 += AVX2_STREAM_STEP;
        q1 += AVX2_STREAM_STEP;
        q2 += AVX2_STREAM_STEP;
    }
#pragma GCC unroll 16
    for (size_t j = 0; j < AVX2_STREAM_STEP; j += 8)
        AVX2_STREAMS_STEP(j);
#undef AVX2_STREAMS_QUARTER
#undef AVX2_STREAMS_STEP
    uint32_t folded = avx2_reduce(avx2_join(x0, x1, x2, x3, x4, x5, x6, x7));
    return hw_shift(folded, shift_by[3 * len / 8]) ^
           hw_shift((uint32_t)r0, shift_by[2 * len / 8]) ^
           hw_shift((uint32_t)r1, shift_by[len / 8]) ^ (uint32_t)r2;
}

/* Hybrid blocks, then plain folding, then the SSE4.2 path for the rest. */
KB_AVX2 static uint32_t avx2_update(uint32_t r, const unsigned char *p, size_t n)
{
    if (n >= AVX2_FOLD_MIN) {
        size_t head = head_length(p, n, 32);
        r = hw_one_stream(r, p, head);
        p += head;
        n -= head;
        while (n >= AVX2_HYBRID_STEP) {
            size_t k = n / AVX2_HYBRID_STEP;
            if (k > AVX2_HYBRID_MAX)
                k = AVX2_HYBRID_MAX;
            r = avx2_hybrid_block(r, p, k);
            p += AVX2_HYBRID_STEP * k;
            n -= AVX2_HYBRID_STEP * k;
        }
        if (n >= 256) {
            size_t body = n & ~(size_t)31;
            r = avx2_fold_all(r, p, body);
            p += body;
            n -= body;
        }
        _mm256_zeroupper(); /* dirty upper halves slow the caller's SSE code */
    }
    return sse42_update(r, p, n);
}

KB_AVX2 uint32_t kb_crc32c_avx2(uint32_t crc, const void *data, size_t length)
{
    return ~avx2_update(~crc, data, length);
}

static int sse42_available;
static int avx2_available;
static int avx512_available;

static void hw_detect(void)
{
    __builtin_cpu_init();
    sse42_available = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    avx512_available = sse42_available && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("vpclmulqdq");
    avx2_available = sse42_available && __builtin_cpu_supports("avx2") &&
                     __builtin_cpu_supports("vpclmulqdq");
    if (sse42_available) {
        shift_build_table();
        fold_build_tables();
    }
}

static const int armv8_available = 0;

#else /* not x86-64: its entry points exist and fall back to software */

static const int sse42_available = 0;
static const int avx2_available = 0;
static const int avx512_available = 0;

uint32_t kb_crc32c_sse42(uint32_t crc, const void *data, size_t length)
{
    return kb_crc32c_sw(crc, data, length);
}

uint32_t kb_crc32c_avx2(uint32_t crc, const void *data, size_t length)
{
    return kb_crc32c_sw(crc, data, length);
}

uint32_t kb_crc32c_avx512(uint32_t crc, const void *data, size_t length)
{
    return kb_crc32c_sw(crc, data, length);
}

#endif /* KB_X86_HW */

#if KB_ARM_HW

/* ---- 4. ARMv8 (aarch64 Linux): path 2 with crc32cx and PMULL ---- */

static uint32_t kb_crc32c_armv8(uint32_t crc, const void *data, size_t length)
{
    return ~hw_update(~crc, data, length);
}

static int armv8_available;

static void hw_detect(void)
{
    unsigned long caps = getauxval(AT_HWCAP);
    armv8_available = (caps & HWCAP_CRC32) && (caps & HWCAP_PMULL);
    if (armv8_available)
        shift_build_table();
}

#elif !KB_X86_HW

static const int armv8_available = 0;

static void hw_detect(void) {}

#endif /* KB_ARM_HW */

/* ---- dispatch: the best path, chosen when the library loads ---- */

struct crc_path {
    const char *name;
    crc_fn fn;
    int available;
};

/* Best first; the first available one is the default. */
static struct crc_path paths[6];
static size_t path_count;

static crc_fn active_fn = kb_crc32c_sw;
static const char *active_name = "software";

static void add_path(const char *name, crc_fn fn, int available)
{
    paths[path_count++] = (struct crc_path){name, fn, available};
}

__attribute__((constructor)) static void kb_crc32c_init(void)
{
    sw_build_tables();
    hw_detect();
#if KB_ARM_HW
    add_path("armv8-crc", kb_crc32c_armv8, armv8_available);
#endif
#if KB_X86_HW
    add_path("avx512-vpclmulqdq", kb_crc32c_avx512, avx512_available);
    add_path("avx2-vpclmulqdq", kb_crc32c_avx2, avx2_available);
    add_path("sse4.2", kb_crc32c_sse42, sse42_available);
#endif
    add_path("software", kb_crc32c_sw, 1);
    for (size_t i = 0; i < path_count; i++) {
        if (paths[i].available) {
            active_fn = paths[i].fn;
            active_name = paths[i].name;
            break;
        }
    }
}

int kb_crc32c_use(const char *name)
{
    for (size_t i = 0; i < path_count; i++) {
        if (strcmp(paths[i].name, name) != 0)
            continue;
        if (!paths[i].available)
            return -2;
        __atomic_store_n(&active_fn, paths[i].fn, __ATOMIC_RELAXED);
        __atomic_store_n(&active_name, paths[i].name, __ATOMIC_RELAXED);
        return 0;
    }
    return -1;
}

const char *kb_crc32c_path_name(size_t i) { return i < path_count ? paths[i].name : NULL; }

int kb_crc32c_path_available(size_t i) { return i < path_count && paths[i].available; }

uint32_t kb_crc32c(uint32_t crc, const void *data, size_t length)
{
    return __atomic_load_n(&active_fn, __ATOMIC_RELAXED)(crc, data, length);
}

int kb_crc32c_sse42_available(void) { return sse42_available; }

int kb_crc32c_avx2_available(void) { return avx2_available; }

int kb_crc32c_avx512_available(void) { return avx512_available; }

int kb_crc32c_hw_available(void) { return sse42_available || armv8_available; }

/* The best hardware path the CPU has (whatever kb_crc32c_use() chose since). */
uint32_t kb_crc32c_hw(uint32_t crc, const void *data, size_t length)
{
    for (size_t i = 0; i < path_count; i++)
        if (paths[i].available)
            return paths[i].fn(crc, data, length);
    return kb_crc32c_sw(crc, data, length);
}

const char *kb_crc32c_implementation(void) { return __atomic_load_n(&active_name, __ATOMIC_RELAXED); }
