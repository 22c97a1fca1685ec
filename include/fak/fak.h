// fak: the umbrella header — every public part in one include.
#ifndef FAK_FAK_H_
#define FAK_FAK_H_

#include "fak/audit/audit.h"
#include "fak/store/blob_store.h"
#include "fak/core/digest.h"
#include "fak/kernels/kernel_tier.h"
#include "fak/kv/kv_cache.h"
#include "fak/session/certify_eviction.h"
#include "fak/session/segment_ledger.h"
#include "fak/gate/manifest.h"
#include "fak/model/model.h"
#include "fak/planner/planner.h"
#include "fak/session/radix_tree.h"
#include "fak/recall/recall.h"
#include "fak/model/sampler.h"
#include "fak/screen/screen.h"
#include "fak/core/status.h"
#include "fak/store/text_corpus.h"
#include "fak/tokenizer/tokenizer.h"
#include "fak/core/version.h"

#endif  // FAK_FAK_H_
