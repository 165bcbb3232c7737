/* HMAC-SHA256 for the authentication trailer (see wire/auth.py and wire/layout.py),
 * in plain C: no allocation, no library, no global state.
 *
 * A key is prepared once (mcm_hmac_prepare): the SHA-256 states after the
 * inner (key ^ 0x36..) and outer (key ^ 0x5c..) pad blocks. Authenticating a
 * message then costs the message's blocks plus one outer block: three
 * compressions for a heartbeat of under 110 bytes. The message is one
 * contiguous span (packet + trailer header, as both sides hold it). The
 * compression uses the CPU's SHA extensions where it has them (x86-64).
 * Tested against hashlib/hmac (tests/tribes/test_auth_kernel.py). Also the wall
 * clock the sequences come from. */
#ifndef MCM_AUTH_H
#define MCM_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct { uint32_t h[8]; } mcm_sha256_state;
typedef struct { mcm_sha256_state inner, outer; } mcm_hmac_key;

static const uint32_t mcm_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static const uint32_t mcm_sha256_iv[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

#define MCM_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static inline uint32_t mcm_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void mcm_sha256_block(mcm_sha256_state *s, const uint8_t *block) {
    uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = mcm_be32(block + 4 * i);
    for (i = 16; i < 64; i++) {
        uint32_t s0 = MCM_ROR(w[i - 15], 7) ^ MCM_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = MCM_ROR(w[i - 2], 17) ^ MCM_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
    e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
    for (i = 0; i < 64; i++) {
        t1 = h + (MCM_ROR(e, 6) ^ MCM_ROR(e, 11) ^ MCM_ROR(e, 25)) + ((e & f) ^ (~e & g))
             + mcm_sha256_k[i] + w[i];
        t2 = (MCM_ROR(a, 2) ^ MCM_ROR(a, 13) ^ MCM_ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
    s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

/* The same compression with the CPU's SHA extensions (x86-64 "SHA-NI",
 * most CPUs since 2017), chosen at run time: about three times faster. The
 * state is kept as the instructions want it (ABEF and CDGH lanes) for the
 * block only. Portable code above is the fallback and the reference. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define MCM_HAVE_SHA_NI_CODE 1

__attribute__((target("sha,sse4.1,ssse3")))
static void mcm_sha256_block_ni(mcm_sha256_state *s, const uint8_t *block) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&s->h[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&s->h[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    __m128i abef_in = abef, cdgh_in = cdgh, w[4], t;
    int g;
    for (g = 0; g < 16; g++) {
        __m128i *x = &w[g & 3];
        if (g < 4) {
            *x = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * g)), bswap);
        } else {
            /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time */
            __m128i prev = w[(g - 1) & 3], prev2 = w[(g - 2) & 3];
            t = _mm_add_epi32(_mm_sha256msg1_epu32(*x, w[(g - 3) & 3]),
                              _mm_alignr_epi8(prev, prev2, 4));
            *x = _mm_sha256msg2_epu32(t, prev);
        }
        t = _mm_add_epi32(*x, _mm_loadu_si128((const __m128i *)&mcm_sha256_k[4 * g]));
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, t);
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(t, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
    t = _mm_shuffle_epi32(abef, 0x1B);             /* FEBA */
    cdgh = _mm_shuffle_epi32(cdgh, 0xB1);          /* DCHG */
    _mm_storeu_si128((__m128i *)&s->h[0], _mm_blend_epi16(t, cdgh, 0xF0));   /* DCBA */
    _mm_storeu_si128((__m128i *)&s->h[4], _mm_alignr_epi8(cdgh, t, 8));      /* HGFE */
}

static int mcm_cpu_has_sha_ni(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
        return 0;                                   /* SSE4.1, SSSE3 */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (b & (1u << 29)) != 0;                   /* SHA */
}
#else
#define MCM_HAVE_SHA_NI_CODE 0
static void mcm_sha256_block_ni(mcm_sha256_state *s, const uint8_t *block) {
    mcm_sha256_block(s, block);
}
static int mcm_cpu_has_sha_ni(void) { return 0; }
#endif

/* -1: not looked yet; 0: portable code; 1: SHA extensions. Set once (a
 * race between threads writes the same value); mcm_sha_ni_use() changes it. */
static int mcm_sha_ni = -1;

static inline void mcm_sha256_compress(mcm_sha256_state *s, const uint8_t *block) {
    if (mcm_sha_ni < 0)
        mcm_sha_ni = mcm_cpu_has_sha_ni();
    if (mcm_sha_ni)
        mcm_sha256_block_ni(s, block);
    else
        mcm_sha256_block(s, block);
}

/* Use the SHA extensions when `wanted` and the CPU has them (tests run both
 * paths); returns whether they are used. */
static int mcm_sha_ni_use(int wanted) {
    mcm_sha_ni = wanted ? mcm_cpu_has_sha_ni() : 0;
    return mcm_sha_ni;
}

/* Finish a hash whose state has absorbed `done` bytes (a multiple of 64)
 * with the remaining message `p[0:n]`; the digest goes to out[32]. */
static void mcm_sha256_finish(mcm_sha256_state *s, uint64_t done, const uint8_t *p, size_t n,
                              uint8_t out[32]) {
    uint8_t tail[128];
    uint64_t bits = (done + n) * 8;
    size_t rest, padded, i;
    while (n >= 64) {
        mcm_sha256_compress(s, p);
        p += 64;
        n -= 64;
    }
    rest = n;
    padded = rest < 56 ? 64 : 128;
    memcpy(tail, p, rest);
    tail[rest] = 0x80;
    memset(tail + rest + 1, 0, padded - rest - 1);
    for (i = 0; i < 8; i++)
        tail[padded - 1 - i] = (uint8_t)(bits >> (8 * i));
    mcm_sha256_compress(s, tail);
    if (padded == 128)
        mcm_sha256_compress(s, tail + 64);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

/* Prepare a key of at most 64 bytes (ours are 32). */
static void mcm_hmac_prepare(mcm_hmac_key *k, const uint8_t *key, size_t len) {
    uint8_t pad[64];
    size_t i;
    for (i = 0; i < 64; i++)
        pad[i] = (uint8_t)((i < len ? key[i] : 0) ^ 0x36);
    memcpy(k->inner.h, mcm_sha256_iv, sizeof mcm_sha256_iv);
    mcm_sha256_compress(&k->inner, pad);
    for (i = 0; i < 64; i++)
        pad[i] ^= 0x36 ^ 0x5c;
    memcpy(k->outer.h, mcm_sha256_iv, sizeof mcm_sha256_iv);
    mcm_sha256_compress(&k->outer, pad);
    memset(pad, 0, sizeof pad);
}

/* HMAC-SHA256 of msg[0:n] under a prepared key; the full 32-byte tag. */
static void mcm_hmac(const mcm_hmac_key *k, const uint8_t *msg, size_t n, uint8_t out[32]) {
    mcm_sha256_state s = k->inner;
    uint8_t inner[32];
    mcm_sha256_finish(&s, 64, msg, n, inner);
    s = k->outer;
    mcm_sha256_finish(&s, 64, inner, 32, out);
}

/* 1 when a[0:n] == b[0:n], in time that depends on n only. */
static int mcm_equal_ct(const uint8_t *a, const uint8_t *b, size_t n) {
    volatile uint8_t diff = 0;
    size_t i;
    for (i = 0; i < n; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

/* Microseconds of the wall clock (as time.time_ns() // 1000): sequences. */
static inline uint64_t mcm_wall_us(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_REALTIME, &t) != 0)
        return 0;
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

#endif
