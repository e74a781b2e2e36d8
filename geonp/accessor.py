"""The ``.np`` accessor on xarray objects: thin, each method one call into :mod:`geonp.api`."""

from __future__ import annotations

import xarray as xr

__all__ = ["GeonpAccessor"]


class GeonpAccessor:
    """Neural-process infilling, forecasting and fitting: ``ds.np.infill(...)``.

    The accessor holds only the wrapped object; fitted models are returned, never stored
    (xarray rebuilds accessors for every new object).
    """

    def __init__(self, obj: xr.Dataset | xr.DataArray) -> None:
        self._obj = obj

    def infill(self, var: str | None = None, **kwargs) -> xr.Dataset:
        """Fill the gaps of ``var``, or predict it at ``targets=``.

        Parameters
        ----------
        var : str, optional
            The variable; may be omitted when the dataset has one.
        model : str, path or geonp.Model, default "bsa-tnp"
            A shipped model name (``"bsa-tnp"``, ``"te-pt-tnp"``), a fitted :class:`geonp.Model`,
            or the path of a saved one.
        targets : Dataset or DataArray, optional
            Predict at these coordinates (e.g. a grid from stations) instead of the gaps.
        covariates : str, list or DataArray, optional
            Elevation (a variable/coordinate name or a DataArray); ``"hour"``/``"doy"`` for a
            fitted model. Found automatically when omitted.
        chunks : int or dict, optional
            Output chunks (``{"time": 24, "latitude": 64, ...}``); the result is then lazy.
        device : str, default "auto"
            ``"auto"`` (GPU when present), ``"cpu"`` or ``"cuda"``.
        crs : optional
            CRS of projected x/y coordinates when the data do not carry one.
        halo : float, optional
            Space halo of each tile's context window, in model units (typical context
            spacings; default 3).
        tile : float, optional
            Edge of the tiles a grid is predicted in, in model units (default 8; stations are
            grouped in squares of that size). Each tile is predicted from its own context window
            (the tile plus the halo): windows the size of the pretraining tasks give better
            predictions than one window over a large grid. Also the default output chunk of a
            space dim that ``chunks`` leaves unset.
        time_window : int, optional
            Frames each side of a target frame used as context.
        frames_per_task : int or "auto", optional
            Predict each run of this many consecutive frames (absolute frame indices
            ``g·k … g·k + k − 1``) as one task, from the frames within ``time_window`` of the
            run's centre: the frames share one encoding of their context. ``1``: one task per
            frame, each frame's context centred on it. ``"auto"`` (the default): 3 when
            ``time_window`` is 3 or more, else 1; always 1 for TE-PT-TNP
            (:func:`geonp.model.frames_per_task`).
        calibrate : bool or "auto", default "auto"
            First calibrate the shipped weights on the input itself (a nugget and the std per gap
            size, from held-out observed values; the gaps are never read), reading at most a
            bounded sample (:func:`geonp.calibrate_input.calibration_sample`). Forward passes only: about
            the cost of ``fit(steps=0)``. ``"auto"`` does so for station data (the shipped weights
            miss the stations' nugget), for grids of departures from each point's annual cycle and
            for grids rough from cell to cell (:func:`geonp.calibrate_input.infill_calibration`), not
            for smooth grids; ``True`` always (shipped model names only), ``False`` never. The output's
            ``geonp_calibrated`` attribute says which.
        land : {"auto", "data", "none"} or str, default "auto"
            The land–sea mask behind a land–sea trend that each task fits to its context and adds
            back at the targets, when its values follow the coast (:func:`geonp.trend.covariate_contrast`).
            ``"data"``: a mask in the data (``lsm``, ``sftlf``, ``land_sea_mask``, ... or CF
            ``land_binary_mask`` / ``land_area_fraction``); ``"auto"``: that, else the bundled
            global land fraction (0.05°, from the GLOBE 1 km mask; :mod:`geonp.coastline`: each grid
            cell's footprint, smoothed over one cell, or a 10 km disk around each station);
            ``"none"``: no land–sea trend; or the name of the mask variable. A model fitted with a
            mask needs one.
        mask : "observed", str or DataArray, optional
            Where the field is defined (True): ``"observed"`` (the points with a value in at least one
            frame; reads the variable once more), or a boolean (0/1) variable, coordinate or DataArray
            on the space dims (``mask=ds.lsm < 0.5`` for a sea-surface field). Points outside are no
            part of the field: not context, not gaps (neither predicted nor counted in the gaps'
            sizes and the data's density), NaN in every output. Without it every NaN is a gap, and a
            grid whose points lack a value in every frame gets a
            :class:`~geonp.errors.NeverObservedWarning`.
        reference : {"auto", "seasonal", "none"}, optional
            What is infilled: ``"seasonal"`` the departures from each point's annual cycle (fitted on
            the whole input, :mod:`geonp.seasonal`; the cycle is added back), so that a point's own
            mean and seasons come from its other years; ``"none"`` the variable itself. Default: the
            model's, ``"auto"`` for shipped weights, which is ``"seasonal"`` for records of two years
            or more (not with ``targets=``). The output's ``geonp_reference`` attribute says which.

        Returns
        -------
        Dataset
            ``{var}_mean``, ``{var}_std`` and (without ``targets``) ``{var}_filled``, with CF
            attributes and the CRS in ``spatial_ref``.

        Examples
        --------
        >>> out = ds.np.infill("t2m")  # doctest: +SKIP
        >>> out.t2m_filled.isel(time=0).plot()  # doctest: +SKIP
        """
        from . import api

        return api.infill(self._obj, var, **kwargs)

    def forecast(self, var: str | None = None, *, hours: float | None = None, steps: int | None = None,
                 **kwargs) -> xr.Dataset:
        """Forecast ``var`` at every lead up to ``hours`` after ``init_time`` (default: the last step).

        ``steps=n`` instead of ``hours`` asks for ``n`` leads of one time step each (handy for daily or
        monthly data; on an axis of calendar months lead ``k`` is ``k`` months later in ``valid_time``).

        Takes ``model``, ``init_time`` (one time or a list), ``chunks``, ``device``, ``crs``,
        ``halo``, ``tile``, ``context_frames`` (past frames used as context) and ``reference``
        (``"diurnal"``: the network forecasts the change since the same hour a day earlier, which
        is added back; ``"none"``: the variable itself; default: the model's, ``"auto"`` for
        shipped models, which picks diurnal for sub-daily data with a day of history), and
        ``calibrate``: calibrate the shipped weights' mean blend with persistence, trend term and
        std per lead on the history up to the first initial time (forward passes only, about
        10–30 CPU-s). ``"auto"`` (default) does so for shipped weights when that history holds at
        least 24 initial times with every lead (:func:`geonp.calibrate_input.calibration_inits`);
        ``True`` always, ``False`` never (the raw network). The output's ``geonp_calibrated``
        attribute says which. ``mask``: where the field is defined, as for :meth:`infill`. Returns
        ``{var}_mean`` and ``{var}_std`` with dims ``(init_time, lead_time, <space>)`` and a
        ``valid_time`` coordinate.
        """
        from . import api

        return api.forecast(self._obj, var, hours=hours, steps=steps, **kwargs)

    def fit(self, var: str | None = None, **kwargs):
        """Train a model on this data and return a :class:`geonp.Model` (``model.save(path)``).

        Takes ``model`` (default ``"bsa-tnp"``; a fitted :class:`geonp.Model` or the path of a
        saved one is trained further on this data, keeping its covariates and windows), ``task``
        (``"infill"`` or ``"forecast"``), ``max_time`` (``"10min"``: the training loop; reading,
        validation and calibration add 20–40 s) and/or ``steps``, ``seed``, ``covariates``,
        ``pretrained`` (start from shipped weights, default ``True``), ``device``, ``progress``,
        ``mask`` (see :meth:`infill`), for ``task="infill"`` ``land`` (see :meth:`infill`), and
        ``reference`` (see :meth:`forecast`, or :meth:`infill` for ``task="infill"``; saved with the
        model). Forecasts use no land–sea trend.
        """
        from . import api

        return api.fit(self._obj, var, **kwargs)


xr.register_dataset_accessor("np")(GeonpAccessor)
xr.register_dataarray_accessor("np")(GeonpAccessor)
