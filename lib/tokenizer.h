/* tokenizer.h — Hugging Face `tokenizer.json` BPE: byte-level (GPT-2, Llama 3, Qwen2 families)
 * and SentencePiece-style (Llama 2, Mistral, Gemma as transformers converts them): encode and
 * decode, exactly as HF `tokenizers` 0.20 does for the configurations below.
 *
 * Supported (anything else is refused at load with SB_EDATA naming the file and the field):
 *  - model: type "BPE"; vocab {token: id}; merges as "a b" strings or ["a","b"] pairs;
 *    ignore_merges; dropout null; continuing_subword_prefix and end_of_word_suffix null or "";
 *    byte-level: byte_fallback false, unk_token null; SentencePiece-style: byte_fallback
 *    (<0xHH> tokens), unk_token, fuse_unk.
 *  - normalizer: null, NFC, Prepend, Replace (a literal string) or a Sequence of these, in
 *    order, applied to the text outside the non-normalized added tokens; added tokens whose
 *    "normalized" is true are matched by their content normalised. NFC: lib/unicode_nfc.h,
 *    Unicode 14.0; the ids of a text that is not NFC decode to its NFC, as HF's do.
 *  - pre_tokenizer, byte-level: ByteLevel(add_prefix_space false, use_regex true) = the GPT-2
 *    pattern, or Sequence[Split(Regex P, "Isolated", invert false), ByteLevel(add_prefix_space
 *    false, use_regex false)] with P the GPT-2, Llama-3 or Qwen2 pattern, matched by
 *    hand-written code (no regex engine), character classes from Unicode 14.0
 *    (lib/unicode_tab.h). SentencePiece-style (symbols are characters): null, Metaspace, or
 *    Split on a literal string.
 *  - decoder: ByteLevel (byte-level); Metaspace, or Sequence[Replace..., ByteFallback, Fuse,
 *    Strip] (SentencePiece-style).
 *  - added_tokens: split out of the text first (leftmost-longest; tokens with normalized false
 *    before those with normalized true, as HF does); single_word, lstrip and rstrip must be false.
 *  - post_processor: only its leading special token is read (sb_tok_bos); truncation and
 *    padding are ignored: encode never adds special tokens.
 * See docs/tokenizer.md.
 */
#ifndef SB_TOKENIZER_H
#define SB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct sb_tok;

/* Load a tokenizer.json file, or one held in memory (name is used in messages). */
int sb_tok_load(const char *path, struct sb_tok **out, struct sb_err *err);
int sb_tok_load_mem(const char *json, size_t n, const char *name, struct sb_tok **out, struct sb_err *err);
void sb_tok_free(struct sb_tok *t); /* NULL ok */

/* Largest id (model vocab or added token) + 1. */
int sb_tok_vocab_size(const struct sb_tok *t);
/* Id of a token string (added token content first, then the model vocab form, as HF's
 * token_to_id), -1 if none. */
int sb_tok_id(const struct sb_tok *t, const char *token);

/* Encode n bytes of UTF-8 text as HF `tokenizer.encode(text, add_special_tokens=False).ids`
 * (added tokens in the text are recognised; under an NFC normalizer the text is normalised
 * first). Invalid UTF-8: SB_EDATA naming the byte offset. *ids is malloc'd (also when
 * *n_ids is 0); the caller frees it. */
int sb_tok_encode(const struct sb_tok *t, const char *text, size_t n, int32_t **ids, size_t *n_ids,
		  struct sb_err *err);

/* Decode ids as HF `tokenizer.decode(ids, skip_special_tokens=False)`, but raw: bytes are
 * not replaced by U+FFFD where the ids split a character (ByteLevel) or where byte tokens make
 * no valid UTF-8 (ByteFallback).
 * *out is malloc'd and NUL-terminated; *n_out excludes the NUL. An id outside the
 * vocabulary is SB_EDATA. */
int sb_tok_decode(const struct sb_tok *t, const int32_t *ids, size_t n, char **out, size_t *n_out,
		  struct sb_err *err);

/* The special token HF's post_processor (TemplateProcessing, alone or in a Sequence) puts
 * before a single sequence when add_special_tokens is true (Llama 3: <|begin_of_text|>), or
 * -1 (GPT-2, Qwen2: none). encode never adds it; a caller that wants HF's default places it. */
int32_t sb_tok_bos(const struct sb_tok *t);

/* A piece cut from a longer UTF-8 text at byte offsets may begin and end inside a character:
 * [*beg, *end) leaves out up to 3 continuation bytes at its start and an incomplete last
 * sequence at its end (nothing else: invalid UTF-8 inside stays for the encoder to refuse). */
void sb_tok_utf8_edges(const uint8_t *s, size_t n, size_t *beg, size_t *end);
/* A generated text (the retrieval battery cuts its haystack essays at byte counts, so a
 * non-ASCII haystack's character can be split inside a probe) with every byte that is no
 * part of a valid UTF-8 character dropped, into out (n bytes of room; out may be s): HF's
 * tokenizers take strings, which cannot hold such bytes. Returns the length kept. */
size_t sb_tok_utf8_clean(const uint8_t *s, size_t n, uint8_t *out);
/* A generated text encoded: sb_tok_utf8_clean, then sb_tok_encode; with bos, after the
 * tokenizer's BOS when its post-processor puts one (a sequence's start, as HF encodes it). */
int sb_tok_encode_clean(const struct sb_tok *t, const uint8_t *s, size_t n, int bos, int32_t **ids, size_t *n_ids,
			struct sb_err *err);

/* The bytes of one token (streaming decode): returns its length and writes min(length, cap)
 * bytes to buf; -1 for an id outside the vocabulary. The rules of a text's start (a Strip
 * decoder, the Metaspace decoder's first token) do not apply: "▁Paris" is " Paris". */
int sb_tok_token_bytes(const struct sb_tok *t, int32_t id, char *buf, size_t cap);

/* For tests and diagnostics: the pre-token boundaries the pattern gives for the whole text
 * (no added-token split, no normalizer): *ends (malloc'd, also when empty) receives the byte
 * offset just after each pre-token, as HF's pre_tokenizer.pre_tokenize_str. Invalid UTF-8 is
 * SB_EDATA naming the byte offset. */
int sb_tok_pretokenize(const struct sb_tok *t, const char *text, size_t n, size_t **ends, size_t *n_ends,
		       struct sb_err *err);

#endif
