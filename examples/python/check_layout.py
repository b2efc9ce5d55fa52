"""Checks that the ctypes structs in memq.py match include/memq.h: reads the sizes and
field offsets that examples/python/layout.c prints (on standard input) and compares them
with ctypes' own. Exits 1 on any difference, naming it. Run by scripts/checks/60-ffi.sh:

    gcc -Iinclude examples/python/layout.c -o layout && ./layout | python3 check_layout.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memq  # noqa: E402

MIRRORS = {
    "memq_topic_config": memq._TopicConfig,
    "memq_receipt": memq._Receipt,
    "memq_slice": memq._Slice,
    "memq_message_meta": memq._Meta,
    "memq_topic_stats": memq._TopicStats,
    "memq_ack_config": memq._AckConfig,
    "memq_ack_group_stats": memq._AckGroupStats,
    "memq_durable_config": memq._DurableConfig,
    "memq_durable_group_config": memq._DurableGroupConfig,
    "memq_durable_receipt": memq._DurableReceipt,
    "memq_durable_meta": memq._DurableMeta,
    "memq_durable_group_stats": memq._DurableGroupStats,
}


def main():
    seen_structs = set()
    seen_fields = set()
    wrong = []
    for line in sys.stdin:
        name, value = line.split()
        value = int(value)
        struct, _, field = name.partition(".")
        mirror = MIRRORS.get(struct)
        if mirror is None:
            wrong.append(f"{struct}: no ctypes mirror in memq.py")
            continue
        if not field:
            seen_structs.add(struct)
            if memq.ctypes.sizeof(mirror) != value:
                wrong.append(f"{struct}: C size {value}, ctypes {memq.ctypes.sizeof(mirror)}")
            continue
        seen_fields.add((struct, field))
        member = getattr(mirror, field, None)
        if member is None:
            wrong.append(f"{struct}.{field}: missing from the ctypes mirror")
        elif member.offset != value:
            wrong.append(f"{struct}.{field}: C offset {value}, ctypes {member.offset}")
    for struct, mirror in MIRRORS.items():
        if struct not in seen_structs:
            wrong.append(f"{struct}: not printed by layout.c")
        for field, _ in mirror._fields_:
            if (struct, field) not in seen_fields:
                wrong.append(f"{struct}.{field}: not printed by layout.c")
    for w in wrong:
        print(f"check_layout: {w}", file=sys.stderr)
    if wrong:
        sys.exit(1)
    print(f"check_layout: {len(MIRRORS)} structs, {len(seen_fields)} fields match memq.h")


if __name__ == "__main__":
    main()
