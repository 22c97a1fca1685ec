// fak: the umbrella header — every public part in one include.
#ifndef FAK_FAK_H_
#define FAK_FAK_H_

#include "fak/audit.h"
#include "fak/blob_store.h"
#include "fak/digest.h"
#include "fak/kernel_tier.h"
#include "fak/kv_cache.h"
#include "fak/ledger.h"
#include "fak/manifest.h"
#include "fak/model.h"
#include "fak/planner.h"
#include "fak/radix_tree.h"
#include "fak/recall.h"
#include "fak/sampler.h"
#include "fak/screen.h"
#include "fak/status.h"
#include "fak/text_corpus.h"
#include "fak/tokenizer.h"
#include "fak/version.h"

#endif  // FAK_FAK_H_
