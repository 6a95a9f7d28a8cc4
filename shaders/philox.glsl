// Philox4x32-10, bit for bit as src/interp/philox.h (randn.comp and dropout.comp include this file;
// it is not a shader of its own: CMake globs only *.comp). umulExtended gives the exact 32x32->64
// products, so every word equals the interpreter's.
//
// The stream: key = (uint(seed), salt), counter = (low word of the element index, high word, 0, 0).

const uint PHILOX_MULTIPLIER0 = 0xD2511F53u;
const uint PHILOX_MULTIPLIER1 = 0xCD9E8D57u;
const uvec2 PHILOX_WEYL = uvec2(0x9E3779B9u, 0xBB67AE85u);

uvec4 philox_round(uvec4 c, uvec2 k) {
  uint high0, low0, high1, low1;
  umulExtended(PHILOX_MULTIPLIER0, c.x, high0, low0);
  umulExtended(PHILOX_MULTIPLIER1, c.z, high1, low1);
  return uvec4(high1 ^ c.y ^ k.x, low1, high0 ^ c.w ^ k.y, low0);
}

// Ten rounds, the key bumped by the Weyl increments before every round but the first. Written out
// rather than looped: llvmpipe caps the loop iterations of one invocation (65535 in total), and a
// grid-stride loop would spend ten of them per element.
uvec4 philox4x32_10(uvec4 c, uvec2 k) {
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  c = philox_round(c, k);
  k += PHILOX_WEYL;
  return philox_round(c, k);
}

// The four words drawn for element (index_high * 2^32 + index_low) of a call keyed by `key`.
uvec4 philox_draw(uvec2 key, uint index_low, uint index_high) {
  return philox4x32_10(uvec4(index_low, index_high, 0u, 0u), key);
}

// The key of one call: the step seed's two's-complement bits and the salt.
uvec2 philox_key(int seed, uint salt) { return uvec2(uint(seed), salt); }
