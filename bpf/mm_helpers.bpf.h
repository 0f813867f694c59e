/* mm_helpers.bpf.h: reading the kernel's memory-management structures from
 * BPF: the size of a folio, the page-cache folio holding a page (XArray walk)
 * and the VMA holding an address (maple-tree walk), all without locks and
 * through probes, so a concurrent change gives at worst a stale answer.
 *
 * These layouts changed across kernels; each CO-RE fallback below names the
 * kernel commit that made it necessary. Include after common.bpf.h.
 */
#ifndef IOTWIN_MM_HELPERS_BPF_H
#define IOTWIN_MM_HELPERS_BPF_H

#include "common.bpf.h"

/* ---- folios --------------------------------------------------------------- */

/* Where the order of a large folio is kept, by kernel:
 *  - no _flags_1 (before "mm: add the first tail page to struct folio",
 *    Linux 6.1): the folio type has no view of its tail page, so a large folio
 *    counts as 1 page;
 *  - the byte _folio_order (from that commit until "mm: reimplement
 *    folio_order() and folio_nr_pages()", Linux 6.6);
 *  - the low byte of _flags_1 (since then).
 * The flavour below describes the 6.1-6.5 layout for CO-RE. */
struct folio___folio_order {
	unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* PG_head's bit number differs between kernels (enum pageflags has been
 * reordered; it is bit 6 in recent kernels, a higher bit in older ones), so it
 * is read from the running kernel's BTF; without the enumerator there, this
 * build's vmlinux.h value is used. */
static __always_inline bool iot_folio_is_large(__u64 flags)
{
	int head = bpf_core_enum_value_exists(enum pageflags, PG_head)
			   ? bpf_core_enum_value(enum pageflags, PG_head)
			   : PG_head;
	return flags & (1ull << (head & 63));
}

/* Pages of the large folio at kernel address `folio` (its head flag is set). */
static __always_inline __u32 iot_large_folio_nr(__u64 folio)
{
	struct folio *f = (void *)folio;
	if (bpf_core_field_exists(f->_flags_1)) {
		struct folio___folio_order *old = (void *)folio;
		if (bpf_core_field_exists(old->_folio_order)) {
			unsigned char order = 0;
			bpf_core_read(&order, sizeof(order), &old->_folio_order);
			return 1u << (order & 0x1f);
		}
		__u64 f1 = 0;
		bpf_core_read(&f1, sizeof(f1), &f->_flags_1);
		return 1u << (f1 & 0x1f);
	}
	return 1;
}

/* Pages of the folio at kernel address `folio` (a number, read with probes):
 * 1 unless it is a large folio (PG_head). */
static __always_inline __u32 iot_folio_nr_at(__u64 folio)
{
	__u64 flags = 0; /* the first word of struct folio */
	bpf_probe_read_kernel(&flags, sizeof(flags), (void *)folio);
	if (!iot_folio_is_large(flags))
		return 1;
	return iot_large_folio_nr(folio);
}

static __always_inline __u32 iot_folio_nr(struct folio *folio)
{
	return iot_folio_nr_at((__u64)folio);
}

/* ---- the page cache (XArray) ------------------------------------------------ */

/* XArray entries (include/linux/xarray.h): internal entries end in binary 10;
 * nodes are internal entries above 4096, siblings (the other slots of a
 * multi-index entry, i.e. a large folio) internal entries below 254; value
 * entries (shadows of evicted pages) end in 1. */
#define IOT_XA_IS_INTERNAL(e) (((e) & 3) == 2)
#define IOT_XA_IS_NODE(e) (IOT_XA_IS_INTERNAL(e) && (e) > 4096)
#define IOT_XA_IS_SIBLING(e) (IOT_XA_IS_INTERNAL(e) && (e) < 254)
#define IOT_XA_MAX_DEPTH 8

/* The folio of the page cache at `mapping` (kernel address) that holds page
 * `index`: its first page index and size. False when the page is not cached.
 * A lock-free walk like xa_load's; a concurrent change can at worst give a
 * stale answer, which the caller only uses to widen a window. */
static __always_inline bool iot_page_folio(__u64 mapping, __u64 index, __u64 *first, __u32 *nr)
{
	struct address_space *m = (void *)mapping;
	__u64 entry = 0;
	if (!mapping || bpf_probe_read_kernel(&entry, sizeof(entry), &m->i_pages.xa_head))
		return false;
	if (IOT_XA_IS_NODE(entry)) {
		for (int level = 0; level < IOT_XA_MAX_DEPTH; level++) {
			struct xa_node *node = (void *)(entry - 2);
			__u8 shift = 0;
			bpf_probe_read_kernel(&shift, sizeof(shift), &node->shift);
			if (level == 0 && (index >> (shift & 63)) > 63)
				return false;
			__u64 off = (index >> (shift & 63)) & 63;
			entry = 0;
			bpf_probe_read_kernel(&entry, sizeof(entry), &node->slots[off]);
			if (IOT_XA_IS_SIBLING(entry)) {
				off = (entry >> 2) & 63;
				entry = 0;
				bpf_probe_read_kernel(&entry, sizeof(entry), &node->slots[off]);
			}
			if (!IOT_XA_IS_NODE(entry) || !shift)
				break;
		}
	} else if (index != 0) {
		return false; /* a lone entry stands for index 0 only */
	}
	if (!entry || IOT_XA_IS_INTERNAL(entry) || (entry & 1))
		return false;
	__u64 fi = 0;
	bpf_probe_read_kernel(&fi, sizeof(fi), &((struct folio *)entry)->index);
	__u32 n = iot_folio_nr_at(entry);
	if (index < fi || index >= fi + n)
		return false;
	*first = fi;
	*nr = n;
	return true;
}

/* ---- VMAs (maple tree) ------------------------------------------------------ */

/* Maple tree (lib/maple_tree.c, "Maple Tree: add new data structure", Linux
 * 6.1): encoded node pointers carry the node type in bits 3-6 (the root
 * pointer also has bit 1 set); range and leaf nodes have 15 pivots and 16
 * slots, allocation-range nodes 9 pivots and 10 slots; unused pivots are 0 and
 * the metadata gives the last used slot. */
#define IOT_MT_ROOT_NODE 2ull
#define IOT_MT_TYPE_SHIFT 3
#define IOT_MT_TYPE_MASK 0xf
#define IOT_MT_NODE_MASK 255ull
#define IOT_MT_MAX_DEPTH 10

struct iot_mt_scratch {
	__u64 pivots[16];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iot_mt_scratch);
} iot_mem_mt_scratch SEC(".maps");

/* The VMA of address space `mm` holding `address`, found by walking its
 * maple tree without locks, as the kernel's own lock_vma_under_rcu does (VMAs
 * and tree nodes are freed by RCU; probes make a torn read harmless). 0 when
 * not found; the caller checks the VMA it gets. Unlike bpf_find_vma this
 * takes no mmap lock, so it neither fails under contention nor defers an
 * unlock to an IPI when called with interrupts off, as in a page fault. */
static __always_inline __u64 iot_mt_find_vma(__u64 mm, __u64 address)
{
	/* VMAs are in mm->mm_mt since "mm: start tracking VMAs with maple tree"
	 * (Linux 6.1); before, in an rbtree this does not walk: 0, and the
	 * caller asks bpf_find_vma. */
	if (!bpf_core_field_exists(((struct mm_struct *)0)->mm_mt))
		return 0;
	__u32 zero = 0;
	struct iot_mt_scratch *s = bpf_map_lookup_elem(&iot_mem_mt_scratch, &zero);
	if (!s)
		return 0;
	struct mm_struct *m = (void *)mm;
	__u64 entry = 0;
	bpf_probe_read_kernel(&entry, sizeof(entry), &m->mm_mt.ma_root);
	if (!IOT_XA_IS_NODE(entry))
		return 0; /* no tree: a lone entry or none */
	entry &= ~IOT_MT_ROOT_NODE;
	__u64 max = ~0ull;
	for (int level = 0; level < IOT_MT_MAX_DEPTH; level++) {
		if (entry < 4096)
			return 0;
		struct maple_node *n = (void *)(entry & ~IOT_MT_NODE_MASK);
		__u32 type = (entry >> IOT_MT_TYPE_SHIFT) & IOT_MT_TYPE_MASK;
		__u8 end = 0;
		if (type == maple_arange_64) {
			bpf_probe_read_kernel(s->pivots, 9 * sizeof(__u64), &n->ma64.pivot);
			bpf_probe_read_kernel(&end, sizeof(end), &n->ma64.meta.end);
		} else if (type == maple_range_64 || type == maple_leaf_64) {
			bpf_probe_read_kernel(s->pivots, 15 * sizeof(__u64), &n->mr64.pivot);
			if (!s->pivots[14])
				bpf_probe_read_kernel(&end, sizeof(end), &n->mr64.meta.end);
			else
				end = s->pivots[14] == max ? 14 : 15;
		} else {
			return 0;
		}
		__u32 offset = 0;
		if (s->pivots[0] >= address) {
			max = s->pivots[0];
		} else {
			offset = 1;
			for (int i = 1; i < 15; i++) {
				if (offset >= end)
					break;
				if (s->pivots[offset & 15] >= address) {
					max = s->pivots[offset & 15];
					break;
				}
				offset++;
			}
		}
		entry = 0;
		if (type == maple_arange_64)
			bpf_probe_read_kernel(&entry, sizeof(entry), &n->ma64.slot[offset < 10 ? offset : 9]);
		else
			bpf_probe_read_kernel(&entry, sizeof(entry), &n->mr64.slot[offset & 15]);
		if (type == maple_leaf_64)
			return IOT_XA_IS_INTERNAL(entry) ? 0 : entry;
	}
	return 0;
}


#endif /* IOTWIN_MM_HELPERS_BPF_H */
