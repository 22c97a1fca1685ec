#!/usr/bin/env python3
"""Makes tests/data/chat/gemma3_chat.gguf: the tiny Gemma 3 test model (tests/data/llama_cpp/
gemma3_q4_k_m.gguf: real architecture, Q4_K_M weights, 288-token SentencePiece vocabulary) given
Gemma's special tokens and the real Gemma 3 chat template, so the planner's tests run a real
template end to end on a real-architecture model.

The tensors and every other key are copied unchanged; only these keys change:
  tokenizer.ggml.tokens      ids 1, 2 become "<eos>", "<bos>"; the last two become
                             "<start_of_turn>", "<end_of_turn>" (as in Gemma's vocabulary)
  tokenizer.ggml.token_type  those four are CONTROL (3)
  tokenizer.ggml.bos_token_id / eos_token_id   2 / 1, as in Gemma
  tokenizer.chat_template    the template file given (added)

usage: make_chat_gguf.py SOURCE.gguf TEMPLATE.jinja OUT.gguf
"""
import struct
import sys

STRING, ARRAY, UINT32, INT32 = 8, 9, 4, 5
SCALAR = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from('<' + fmt, self.data, self.at)
        self.at += struct.calcsize('<' + fmt)
        return v[0]

    def string(self):
        n = self.take('Q')
        s = self.data[self.at:self.at + n]
        self.at += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take('I'), self.take('Q')
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[t])


def put_string(out, s):
    out += struct.pack('<Q', len(s)) + s


def put_value(out, t, v):
    if t == STRING:
        put_string(out, v)
    elif t == ARRAY:
        et, items = v
        out += struct.pack('<IQ', et, len(items))
        for item in items:
            put_value(out, et, item)
    else:
        out += struct.pack('<' + SCALAR[t], v)


def main(source, template, target):
    data = open(source, 'rb').read()
    r = Reader(data)
    magic, version = r.take('I'), r.take('I')
    n_tensors, n_kv = r.take('Q'), r.take('Q')
    kvs = []
    for _ in range(n_kv):
        key = r.string()
        t = r.take('I')
        kvs.append([key, t, r.value(t)])
    tensor_infos_at = r.at
    for _ in range(n_tensors):
        r.string()
        n_dims = r.take('I')
        r.at += 8 * n_dims + 4 + 8
    tensor_infos = data[tensor_infos_at:r.at]
    alignment = next((v for k, t, v in kvs if k == b'general.alignment'), 32)
    data_at = (r.at + alignment - 1) // alignment * alignment

    special = {1: b'<eos>', 2: b'<bos>'}
    for k in kvs:
        if k[0] == b'tokenizer.ggml.tokens':
            tokens = k[2][1]
            special[len(tokens) - 2], special[len(tokens) - 1] = b'<start_of_turn>', b'<end_of_turn>'
            for i, text in special.items():
                tokens[i] = text
    for k in kvs:
        if k[0] == b'tokenizer.ggml.token_type':
            for i in special:
                k[2][1][i] = 3
        elif k[0] == b'tokenizer.ggml.bos_token_id':
            k[2] = 2
        elif k[0] == b'tokenizer.ggml.eos_token_id':
            k[2] = 1
    kvs.append([b'tokenizer.chat_template', STRING, open(template, 'rb').read()])

    out = bytearray(struct.pack('<IIQQ', magic, version, n_tensors, len(kvs)))
    for key, t, v in kvs:
        put_string(out, key)
        out += struct.pack('<I', t)
        put_value(out, t, v)
    out += tensor_infos
    out += b'\0' * ((-len(out)) % alignment)
    out += data[data_at:]
    open(target, 'wb').write(out)


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
