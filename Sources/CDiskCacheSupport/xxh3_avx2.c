// XXH3-64 compiled for AVX2 (see xxh3_vector.inc). Debian's libxxhash is built for the x86-64
// baseline (SSE2), which hashes at about half the speed on the same machine.
#define VECTOR_TARGET "avx2"
#define XXH_VECTOR 2 /* XXH_AVX2 */
#define VECTOR_XXH3 cdiskcache_xxh3_64_avx2
#define VECTOR_UPDATE cdiskcache_xxh3_update_avx2
#define READ_HASH_NAME cdiskcache_read_hashing_avx2
#define HASH_FILE_NAME cdiskcache_hash_file_avx2
#include "xxh3_vector.inc"
