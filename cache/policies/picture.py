"""The current picture: the newest version of every visual region the cache received, which no eviction removes.

With `CacheConfig.pin_picture` the cache keeps, per layer and KV head, the tokens of the newest frame holding each
region of the frame grid (`TokenView.frame` / `.region`: the model's ids). A fixed camera whose unchanged regions
are not fed (model/change.py) thus always has a complete picture in the cache, whatever the policy evicted
meanwhile. When a newer token of a region arrives, the older one is ordinary history again: the policy scores it
like any other token and, evicted, it is in the host store like any other.

Everything here is a pure function of the tokens' ids; the cache (`BoundedCache.evict`) and the shared selection
(`cache.policies.select_keep`) apply it.
"""

from __future__ import annotations

import torch


class PictureOverflow(ValueError):
    """The current picture and the other tokens that must stay do not fit in what an eviction keeps."""


def newest_of_each_region(frame: torch.Tensor, region: torch.Tensor, since: int = 0) -> torch.Tensor:
    """[..., n] bool: the tokens of the newest frame holding each region, among the visual tokens of frames >= `since`.

    frame, region: [..., n] int64 (-1 for text, which is never part of the picture). Frames before `since` are of
    a grid the stream no longer has (the frame size changed): none of their regions is pinned. Where a model
    gives one region several tokens of the same frame, all of them are the region's newest version.
    """
    visual = (region >= 0) & (frame >= max(since, 0))
    if not bool(visual.any()):
        return visual
    slot = region.clamp(min=0)  # [..., n]
    marked = torch.where(visual, frame, torch.full_like(frame, -1))
    newest = torch.full((*frame.shape[:-1], int(slot.max()) + 1), -1, dtype=frame.dtype, device=frame.device)
    newest = newest.scatter_reduce(-1, slot, marked, reduce="amax")  # [..., regions]: the newest frame of each
    return visual & (frame == newest.gather(-1, slot))


def check_room(must_keep: torch.Tensor, picture: torch.Tensor, target: int) -> None:
    """Raises PictureOverflow when a layer and head must keep more than `target` tokens.

    must_keep: [..., n] bool, every token the eviction may not remove (the picture, the retrieval window, sinks);
    picture: [..., n] bool, those of the current picture.
    """
    most = int(must_keep.sum(dim=-1).max()) if must_keep.numel() else 0
    if most <= target:
        return
    pictured = int(picture.sum(dim=-1).max())
    raise PictureOverflow(
        f"the current picture ({pictured} tokens) and the other tokens that must stay (the retrieval window, "
        f"sinks: {most - pictured}) need {most} tokens, but this eviction keeps {target}: "
        "raise the budget (--budget) or stop pinning the picture (--no-pin-picture)"
    )
